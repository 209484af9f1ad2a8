"""The [read_paths] entry forms (lev_nb.blueprint.read_paths): compiling, glob and regex matching, samples."""

from __future__ import annotations

import pytest

from lev_nb.blueprint.read_paths import (
    SAMPLE_COMPONENT,
    GlobPattern,
    ReadPathError,
    ReadPathSet,
    compile_entry,
    grant_stanza,
)


def matches(pattern: str, path: str) -> bool:
    return GlobPattern(pattern).matches(path)


# ------------------------------------------------------------------------------------------------
# Globs
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("pattern, yes, no", [
    ("a*b", ["a_b", "ab"], ["a/b"]),
    ("a*b*c", ["abc", "a_b_c", "a___b___c"], ["abcd"]),
    ("abc*abc*abc", ["abcabcabcabcabcabcabc"], ["abcabcabcabcabcabcabca"]),
    ("a*b[xyz]c*d", ["abxcdbxcddd"], []),
    ("some/**/needle.txt", ["some/needle.txt", "some/one/needle.txt", "some/one/two/needle.txt"],
     ["some/other/notthis.txt"]),
    ("some/**/**/needle.txt", ["some/needle.txt", "some/one/two/needle.txt"], []),
    ("**", ["abcde", "", ".asdf", "/x/.asdf"], []),
    ("**/test", ["one/two/test", "one/test", "test"], []),
    ("/**/test", ["/one/two/test", "/one/test", "/test"], ["/one/notthis", "/notthis"]),
    ("**/.*", [".abc", "abc/.abc"], ["ab.c", "abc/ab.c"]),
    ("a[0-9]b", ["a0b", "a9b"], ["a_b"]),
    ("a[!0-9]b", ["a_b"], ["a5b"]),
    ("[abc-]", ["a", "c", "-"], ["d"]),
    ("[-]", ["-"], []),
    ("[!-]", ["a"], ["-"]),
    ("c?t", ["cat"], ["c/t"]),
    ("/data/runs/*", ["/data/runs/r1"], ["/data/runs/r1/log.txt"]),  # * stays in one component
    ("/data/runs/**", ["/data/runs/r1/log.txt"], ["/data/other/x", "/data/runs"]),
])
def test_glob_matching(pattern: str, yes: list[str], no: list[str]) -> None:
    for path in yes:
        assert matches(pattern, path), (pattern, path)
    for path in no:
        assert not matches(pattern, path), (pattern, path)


@pytest.mark.parametrize("pattern", ["a/**b", "a/bc**", "a/*****", "a/b**c**d", "a**b", "abc[def", "abc[!def",
                                     "abc[", "abc[!", "abc[d", "abc[]", "abc[!]"])
def test_invalid_globs(pattern: str) -> None:
    with pytest.raises(ValueError):
        GlobPattern(pattern)


def test_escape_makes_metacharacters_literal() -> None:
    text = "/we[ird]/a*b?"
    assert matches(GlobPattern.escape(text), text) and not matches(GlobPattern.escape(text), "/wei/a*b?")


# ------------------------------------------------------------------------------------------------
# Compiling entries
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("entry, home, words", [
    ("", "/h", "empty"),
    ("   ", "/h", "empty"),
    ("glob:", None, "the glob is empty"),
    ("regex:", None, "the regex is empty"),
    ("glob:/a/[", None, "not a valid glob"),
    ("regex:/a/(", None, "not a valid regex"),
    ("regex:etc/passwd", None, "must start with '/'"),
    ("~other/x", "/h", "only '~/'"),
    ("glob:~other/**", "/h", "only '~/'"),
    ("regex:~other/.*", "/h", "only '~/'"),
    ("~/docs", None, "no home folder"),
    ("glob:~/docs/**", None, "no home folder"),
    ("glob:/a/../b/**", None, "cannot contain '.' or '..'"),
    ("glob:/a/./b", None, "cannot contain '.' or '..'"),
    ("glob:../../../x/**", None, "climbs above the root"),
])
def test_entries_that_do_not_compile(entry: str, home: str | None, words: str) -> None:
    with pytest.raises(ReadPathError) as info:
        compile_entry(entry, "/w", home)
    assert words in str(info.value)


def test_relative_and_home_entries_are_anchored() -> None:
    s = ReadPathSet.compile(["glob:../shared/**"], "/w/agent", None)
    assert s.matches_lexically("/w/shared/notes/a.md")
    assert not s.matches_lexically("/w/agent/own.md") and not s.matches_lexically("/elsewhere/shared/a.md")
    assert ReadPathSet.compile(["glob:docs/**"], "/", None).matches_lexically("/docs/a.md")
    dots = ReadPathSet.compile(["glob:../"], "/a/b", None)
    assert dots.matches_lexically("/a") and not dots.matches_lexically("/a/b")
    weird = ReadPathSet.compile(["glob:./docs/**"], "/we[ird]/w", None)  # the workdir is data, not pattern
    assert weird.matches_lexically("/we[ird]/w/docs/a.md") and not weird.matches_lexically("/wei/w/docs/a.md")
    home = ReadPathSet.compile(["glob:~/docs/**"], "/w", "/ho[me]")
    assert home.matches_lexically("/ho[me]/docs/a.md") and not home.matches_lexically("/hom/docs/a.md")
    exact = ReadPathSet.compile(["../shared", "~/notes"], "/w/agent", "/home/me")
    assert exact.matches_lexically("/w/agent/../shared/x") and exact.matches_lexically("/home/me/notes/a")


def test_exact_roots_grant_their_subtree_on_component_boundaries() -> None:
    s = ReadPathSet.compile(["/a/b"], "/w", None)
    assert s.matches_lexically("/a/b") and s.matches_lexically("/a/b/c")
    assert not s.matches_lexically("/a/bc")
    assert ReadPathSet.compile(["/"], "/w", None).matches_lexically("/anything")


def test_regexes_are_anchored_to_the_whole_path() -> None:
    s = ReadPathSet.compile(["regex:/etc/runs"], "/w", None)
    assert s.matches_lexically("/etc/runs")
    assert not s.matches_lexically("/etc/runs-anything") and not s.matches_lexically("/prefix/etc/runs")


@pytest.mark.parametrize("entry, sample", [
    ("/data/runs", "/data/runs"),
    ("~/notes/project", "/home/u/notes/project"),
    ("glob:/data/docs/**", f"/data/docs/{SAMPLE_COMPONENT}"),
    ("glob:/data/r?n/*.md", f"/data/rxn/{SAMPLE_COMPONENT}.md"),
    ("glob:/a/[bc]/x", None),  # a class would have to be guessed at
    ("regex:/data/runs/.*", f"/data/runs/{SAMPLE_COMPONENT}"),
    ("regex:/data/exact", "/data/exact"),
    ("regex:/data/.*/x", None),
    ("regex:~/notes/.*", f"/home/u/notes/{SAMPLE_COMPONENT}"),
])
def test_sample_paths(entry: str, sample: str | None) -> None:
    assert compile_entry(entry, "/w", "/home/u").sample_path() == sample


def test_grant_stanza_is_valid_toml() -> None:
    import tomllib

    text = grant_stanza("my agent", ['C:\\data', 'a"b', "glob:~/x/**"])
    assert tomllib.loads(text) == {"agent_read_paths": {"my agent": {"allow": ['C:\\data', 'a"b', "glob:~/x/**"]}}}


# ------------------------------------------------------------------------------------------------
# A blueprint's entries are syntax-checked when it loads, as a run would compile them
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("entry, words", [
    ("regex:relative/.*", "a regex must start with '/'"),
    ("glob:/a/**b", "not a valid glob"),
    ("glob:/a/../b", "cannot contain '.' or '..'"),
    ("~other/notes", "only '~/'"),
])
def test_a_blueprint_entry_that_cannot_compile_is_a_parse_error(entry: str, words: str) -> None:
    from lev_nb.blueprint import BlueprintError, load

    with pytest.raises(BlueprintError) as info:
        load(f'[agent]\nname = "x"\n[read_paths]\nallow = ["{entry}"]\n')
    assert info.value.kind == "parse" and info.value.key_path == "read_paths.allow"
    assert words in info.value.message and info.value.message.startswith("[read_paths]: ")


@pytest.mark.parametrize("entry", ["glob:/a/{b", "glob:../../shared/**", "relative/path", "~/notes", "regex:~/x/.*"])
def test_entries_that_compile_load(entry: str) -> None:
    from lev_nb.blueprint import load

    assert load(f'[agent]\nname = "x"\n[read_paths]\nallow = ["{entry}"]\n').read_paths.allow == [entry]


def test_load_hands_a_blueprint_back_as_it_is() -> None:
    import lev_nb
    from support import BLUEPRINTS

    bp = lev_nb.load(BLUEPRINTS / "triage")
    assert lev_nb.load(bp) is bp  # run, run_many and their workers call load once on either
