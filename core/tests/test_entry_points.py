"""tinycore/entry_points.py reads the same entry points importlib.metadata does, from dist-info folders on sys.path."""
import importlib.metadata as md
import sys
import pytest
from tinycore.entry_points import Dist, EntryPoint, entry_points, parse_entry_points

GROUPS = ("tinycore.backends", "tinycore.devices")

def test_parse_groups_comments_and_extras():
  text = ("# a comment\n[console_scripts]\nx = a:b\n[tinycore.backends]\n; another\nfoo = foo_pkg.plugin\n"
          "bar=bar_pkg.mod:obj.attr [extra1]\nnot a pair\n[tinycore.devices]\nFOO = foo:10\n")
  eps = parse_entry_points(text, Dist("d", "1"), GROUPS)
  assert [(e.group, e.name, e.value) for e in eps] == [("tinycore.backends", "foo", "foo_pkg.plugin"),
                                                       ("tinycore.backends", "bar", "bar_pkg.mod:obj.attr [extra1]"),
                                                       ("tinycore.devices", "FOO", "foo:10")]
  assert EntryPoint("j", "json:dumps", "g").load() is __import__("json").dumps
  assert EntryPoint("j", "json.decoder:JSONDecoder.decode [x]", "g").load() is __import__("json").decoder.JSONDecoder.decode
  with pytest.raises(ValueError, match="not 'module' or 'module:attr'"): EntryPoint("bad", "not valid!", "g").load()

def test_same_as_importlib_metadata(tmp_path, monkeypatch):
  site = tmp_path / "site"; site.mkdir()
  di = site / "tcfake_ep-2.5.dist-info"; di.mkdir()
  (di / "METADATA").write_text("Metadata-Version: 2.1\nName: tcfake-ep\nVersion: 2.5\n\nbody: not a header\n")
  (di / "entry_points.txt").write_text("[tinycore.backends]\nep = tcfake_ep.plugin\n[tinycore.devices]\nEP = ep:3\n")
  (site / "nometa-1.0.dist-info").mkdir()   # a distribution without entry points: nothing, no error
  monkeypatch.setattr(sys, "path", [str(site), *sys.path])
  key = lambda e, name, ver: (e.group, e.name, e.value, name, ver)
  mine = sorted(key(e, e.dist.name, e.dist.version) for e in entry_points(GROUPS, lambda why: pytest.fail(why)))
  ref = sorted(key(e, e.dist.metadata["Name"], e.dist.version) for d in md.distributions() for e in d.entry_points if e.group in GROUPS)
  assert mine == ref and ("tinycore.backends", "ep", "tcfake_ep.plugin", "tcfake-ep", "2.5") in mine

def test_unreadable_entry_points_are_reported_not_fatal(tmp_path, monkeypatch):
  site = tmp_path / "site"; site.mkdir()
  di = site / "broken-1.0.dist-info"; di.mkdir()
  (di / "entry_points.txt").mkdir()   # a folder where the file should be: reading it fails
  ok = site / "good-1.0.dist-info"; ok.mkdir()
  (ok / "entry_points.txt").write_text("[tinycore.backends]\ngood = good\n")
  monkeypatch.setattr(sys, "path", [str(site)])
  seen: list[str] = []
  eps = entry_points(GROUPS, seen.append)
  assert [e.name for e in eps] == ["good"] and eps[0].dist == Dist("good", "1.0")   # no METADATA: the folder's name
  assert len(seen) == 1 and "broken-1.0.dist-info" in seen[0]
