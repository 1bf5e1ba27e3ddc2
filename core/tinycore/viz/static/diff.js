// Line diff (longest common subsequence) of a rewrite step's before and after trees. Lines are compared without their
// indentation: a rule that removes a wrapper (x*1 -> x) moves the whole subtree up a level, and that is not a change.
"use strict";
function diffLines(before, after) {
  const a = before.map(l => l.trim()), b = after.map(l => l.trim());
  const n = a.length, m = b.length;
  // lcs[i][j]: the LCS length of a[i:] and b[j:], in one flat array
  const lcs = new Uint32Array((n + 1) * (m + 1));
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--)
      lcs[i * (m + 1) + j] = a[i] === b[j] ? lcs[(i + 1) * (m + 1) + j + 1] + 1 : Math.max(lcs[(i + 1) * (m + 1) + j], lcs[i * (m + 1) + j + 1]);
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { out.push(["same", after[j]]); i++; j++; }
    else if (lcs[(i + 1) * (m + 1) + j] >= lcs[i * (m + 1) + j + 1]) out.push(["del", before[i++]]);
    else out.push(["add", after[j++]]);
  }
  while (i < n) out.push(["del", before[i++]]);
  while (j < m) out.push(["add", after[j++]]);
  return out;
}
