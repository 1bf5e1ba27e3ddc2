// A small syntax highlighter for the C-like sources renderers emit (C, CUDA, HIP, Metal, OpenCL C, WGSL) and LLVM IR:
// one regex pass splits the text into tokens, each appended as a text node (never parsed as HTML).
"use strict";
const HL_KEYWORDS = new Set(("if else for while do return break continue switch case default struct union typedef static inline " +
  "extern const volatile restrict __restrict__ __global__ __device__ __shared__ __syncthreads kernel __kernel global local " +
  "device threadgroup constant using namespace template fn let var loop define declare call ret br label phi " +
  "getelementptr load store alloca fadd fmul fsub fdiv add mul sub icmp fcmp select").split(" "));
const HL_TYPES = /^(void|bool|_Bool|char|short|int|long|unsigned|signed|float|double|half|bfloat16|__bf16|size_t|u?int(8|16|32|64)_t|u?char\d*|u?short\d*|u?int\d*|u?long\d*|float\d*|half\d*|double\d*|[iuf](8|16|32|64)|vec[234]<\w+>|ptr|i1|array)$/;
const HL_TOKEN = /(\/\/[^\n]*|\/\*[\s\S]*?\*\/|;[^\n]*$)|("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')|(^[ \t]*#[^\n]*)|(\b0x[0-9a-fA-F]+[uUlL]*|\b\d+\.?\d*(?:[eE][+-]?\d+)?[fFuUlLh]*)|([A-Za-z_%@][\w.$]*)/gm;

function highlight(pre, text, ir) {
  pre.textContent = "";
  const frag = document.createDocumentFragment();
  let last = 0, m;
  const span = (cls, s) => { const e = document.createElement("span"); e.className = cls; e.textContent = s; frag.appendChild(e); };
  HL_TOKEN.lastIndex = 0;
  while ((m = HL_TOKEN.exec(text)) !== null) {
    if (m.index > last) frag.appendChild(document.createTextNode(text.slice(last, m.index)));
    const [tok, com, str, pp, num, word] = m;
    if (com !== undefined && (ir || !com.startsWith(";"))) span("tok-com", com);
    else if (com !== undefined) frag.appendChild(document.createTextNode(com));
    else if (str !== undefined) span("tok-str", str);
    else if (pp !== undefined) span("tok-pp", pp);
    else if (num !== undefined) span("tok-num", num);
    else if (word !== undefined) {
      if (HL_KEYWORDS.has(word)) span("tok-kw", word);
      else if (HL_TYPES.test(word)) span("tok-type", word);
      else if (text[HL_TOKEN.lastIndex] === "(") span("tok-fn", word);
      else frag.appendChild(document.createTextNode(word));
    }
    last = m.index + tok.length;
    if (tok.length === 0) HL_TOKEN.lastIndex++;
  }
  if (last < text.length) frag.appendChild(document.createTextNode(text.slice(last)));
  pre.appendChild(frag);
}
