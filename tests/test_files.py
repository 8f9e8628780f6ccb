"""Which files `check` finds: excludes, .gitignore, virtual environments, symlinks."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from deadline import deadline
from lint_nograd.run.files import DEFAULT_EXCLUDE, compile_patterns, discover


def make(root: Path, *files: str) -> None:
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


def found(tmp_path, paths=(".",), exclude=DEFAULT_EXCLUDE, respect_gitignore=True, root=None,
          cwd=None):
    result = discover(list(paths), root=root or tmp_path, exclude=compile_patterns(exclude),
                      respect_gitignore=respect_gitignore, cwd=cwd or tmp_path)
    return [shown for _, shown in result.files]


def test_walks_python_files_in_sorted_order(tmp_path):
    make(tmp_path, "b.py", "a/z.py", "a/b/c.py", "notes.txt", "stub.pyi", "a/data.json")
    assert found(tmp_path) == ["a/b/c.py", "a/z.py", "b.py"]


@pytest.mark.parametrize("folder", [".git", ".venv", "venv", "build", "dist", "node_modules",
                                    "__pypackages__", ".lint_nograd_cache", "pkg/.tox"])
def test_default_excludes(tmp_path, folder):
    make(tmp_path, "keep.py", f"{folder}/skip.py")
    assert found(tmp_path) == ["keep.py"]


@pytest.mark.parametrize("paths", [["."], ["pkg"], ["pkg/build"], ["build.py", "pkg"]])
def test_plain_names_are_matched_as_the_patterns_match(tmp_path, paths):
    """Excludes that are all plain names are matched by a path's last part: the same files."""
    make(tmp_path, "keep.py", "build.py", "pkg/build/x.py", "pkg/builder/y.py", "pkg/dist", "pkg/a/dist/z.py",
         "pkg/a/dist.py", "pkg/build/deep/dist/w.py", "pkg/mybuild.py")
    plain = compile_patterns(["build", "dist"])
    assert plain.names == {"build", "dist"}
    as_patterns = compile_patterns(["build", "dist"])
    as_patterns.names = None
    walked = [discover(paths, root=tmp_path, exclude=exclude, cwd=tmp_path).files for exclude in (plain, as_patterns)]
    assert walked[0] == walked[1] and walked[0]


@pytest.mark.parametrize("path", ["build", "build/", "a/build", "a/build/x.py", "build.py", "a/builds/x.py",
                                  "dist/a/", "a.dist", "x/y/z.py", "x/.dist/"])
def test_plain_names_match_as_gitignore_patterns(path):
    plain = compile_patterns(["build", "dist", ".dist"])
    as_patterns = compile_patterns(["build", "dist", ".dist"])
    as_patterns.names = None
    assert plain.names is not None and plain.match_file(path) == as_patterns.match_file(path)


@pytest.mark.parametrize("patterns", [["build/"], ["*.py"], ["a/b"], ["!keep"], [".."], ["x y"]])
def test_only_plain_names_are_taken_as_names(patterns):
    assert compile_patterns(patterns).names is None


def test_any_virtual_environment_is_skipped(tmp_path):
    make(tmp_path, "keep.py", "my-env/lib/site.py", "my-env/pyvenv.cfg")
    assert found(tmp_path) == ["keep.py"]


@pytest.mark.parametrize("gitignore, expected", [
    ("generated/\n", ["keep.py", "sub/deep.py", "sub/gen.py"]),
    ("gen.py\n", ["generated/out.py", "keep.py", "sub/deep.py"]),
    ("/gen.py\n", ["generated/out.py", "keep.py", "sub/deep.py", "sub/gen.py"]),
    ("*.py\n!keep.py\n", ["keep.py"]),
    ("# nothing\n", ["generated/out.py", "keep.py", "sub/deep.py", "sub/gen.py"]),
])
def test_root_gitignore(tmp_path, gitignore, expected):
    make(tmp_path, "keep.py", "generated/out.py", "sub/gen.py", "sub/deep.py")
    (tmp_path / ".gitignore").write_text(gitignore)
    assert found(tmp_path) == expected


def test_nested_gitignore_is_relative_to_its_folder_and_can_reinclude(tmp_path):
    make(tmp_path, "a.py", "pkg/a.py", "pkg/b.py", "pkg/inner/c.py", "other/inner/d.py")
    (tmp_path / ".gitignore").write_text("b.py\n")
    (tmp_path / "pkg" / ".gitignore").write_text("/inner/\n!b.py\na.py\n")
    assert found(tmp_path) == ["a.py", "other/inner/d.py", "pkg/b.py"]


def test_gitignore_above_the_named_folder_applies(tmp_path):
    make(tmp_path, "src/pkg/keep.py", "src/pkg/gen_x.py")
    (tmp_path / ".gitignore").write_text("gen_*.py\n")
    assert found(tmp_path, ["src/pkg"]) == ["src/pkg/keep.py"]


def test_no_respect_gitignore(tmp_path):
    make(tmp_path, "a.py", "b.py")
    (tmp_path / ".gitignore").write_text("b.py\n")
    assert found(tmp_path, respect_gitignore=False) == ["a.py", "b.py"]


@pytest.mark.parametrize("exclude, expected", [
    (["legacy"], ["build/b.py", "keep.py", "src/legacy.py/x.py", "src/mod.py"]),  # no defaults
    ([*DEFAULT_EXCLUDE, "legacy"], ["keep.py", "src/legacy.py/x.py", "src/mod.py"]),
    ([*DEFAULT_EXCLUDE, "src/*.py"], ["keep.py", "legacy/old.py"]),  # folders match too
    ([*DEFAULT_EXCLUDE, "*.py", "!src/mod.py"], ["src/mod.py"]),
])
def test_exclude_globs(tmp_path, exclude, expected):
    make(tmp_path, "keep.py", "legacy/old.py", "src/mod.py", "build/b.py", "src/legacy.py/x.py")
    assert found(tmp_path, exclude=exclude) == expected


def test_exclude_globs_are_relative_to_the_project_root(tmp_path):
    make(tmp_path, "pkg/gen/a.py", "pkg/sub/gen/b.py")
    pkg = tmp_path / "pkg"
    assert found(tmp_path, exclude=["pkg/gen"], cwd=pkg) == ["sub/gen/b.py"]


def test_named_files_are_checked_whatever_their_name_or_exclusion(tmp_path):
    make(tmp_path, "build/a.py", "script", "ignored.py")
    (tmp_path / ".gitignore").write_text("ignored.py\n")
    assert found(tmp_path, ["build/a.py", "script", "ignored.py"]) == ["build/a.py", "ignored.py",
                                                                       "script"]


def test_a_named_excluded_folder_is_walked(tmp_path):
    make(tmp_path, "build/a.py", "build/sub/b.py")
    assert found(tmp_path, ["build"]) == ["build/a.py", "build/sub/b.py"]


def test_a_file_named_twice_is_found_once(tmp_path):
    make(tmp_path, "a.py")
    assert found(tmp_path, [".", "a.py", "./a.py"]) == ["a.py"]


def test_missing_paths_are_reported_and_the_rest_found(tmp_path):
    make(tmp_path, "a.py")
    result = discover(["nope", "a.py", "gone/x.py"], root=tmp_path,
                      exclude=compile_patterns(DEFAULT_EXCLUDE), cwd=tmp_path)
    assert result.missing == ["nope", "gone/x.py"]
    assert [shown for _, shown in result.files] == ["a.py"]


def test_paths_outside_the_current_folder_are_shown_as_given(tmp_path):
    make(tmp_path, "project/a.py", "elsewhere/pkg/b.py")
    project = tmp_path / "project"
    result = discover([".", "../elsewhere/pkg", str(tmp_path / "project" / "a.py")], root=project,
                      exclude=compile_patterns(DEFAULT_EXCLUDE), cwd=project)
    assert [shown for _, shown in result.files] == [
        os.path.join("..", "elsewhere", "pkg", "b.py"), "a.py"]
    assert all(path.is_absolute() for path, _ in result.files)


symlinks = pytest.mark.skipif(os.name == "nt", reason="POSIX symlinks")


@symlinks
def test_symlink_loop_ends(tmp_path):
    make(tmp_path, "pkg/a.py")
    (tmp_path / "pkg" / "loop").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "self").symlink_to(tmp_path / "self")
    assert found(tmp_path) == ["pkg/a.py"]


@symlinks
def test_broken_symlink_is_skipped_when_walking_and_missing_when_named(tmp_path):
    make(tmp_path, "a.py")
    (tmp_path / "dangling.py").symlink_to(tmp_path / "gone.py")
    assert found(tmp_path) == ["a.py"]
    result = discover(["dangling.py"], root=tmp_path, exclude=compile_patterns([]), cwd=tmp_path)
    assert result.missing == ["dangling.py"] and result.files == []


@symlinks
def test_symlinked_file_is_found_under_its_link_name(tmp_path):
    make(tmp_path, "real/a.py")
    (tmp_path / "link.py").symlink_to(tmp_path / "real" / "a.py")
    assert found(tmp_path) == ["link.py", "real/a.py"]


@pytest.mark.skipif(os.name == "nt" or os.geteuid() == 0, reason="root reads everything")
def test_unreadable_folder_is_reported_not_fatal(tmp_path):
    make(tmp_path, "a.py", "locked/b.py")
    (tmp_path / "locked").chmod(0)
    try:
        result = discover(["."], root=tmp_path, exclude=compile_patterns([]), cwd=tmp_path)
    finally:
        (tmp_path / "locked").chmod(0o755)
    assert [shown for _, shown in result.files] == ["a.py"]
    assert result.unreadable == ["cannot read folder locked: Permission denied; its files are not checked"]


@symlinks
def test_a_folder_link_is_followed_only_inside_the_tree_given(tmp_path):
    make(tmp_path, "tree/pkg/a.py", "outside/b.py", "tree/sub/c.py")
    tree = tmp_path / "tree"
    (tree / "out").symlink_to(tmp_path / "outside", target_is_directory=True)
    (tree / "alias").symlink_to(tree / "pkg", target_is_directory=True)
    (tree / "sub" / "up").symlink_to(tree / "pkg", target_is_directory=True)
    walked = found(tree)
    assert "sub/c.py" in walked and not any(name.startswith("out/") for name in walked)
    assert len(walked) == 2 and set(walked) & {"alias/a.py", "pkg/a.py", "sub/up/a.py"}  # once, by any name
    assert found(tree, ["sub"]) == ["sub/c.py"]  # pkg/ is outside the tree `sub` names
    assert found(tree, ["out"]) == ["out/b.py"]  # a link named on the command line leads where it points
    assert found(tree, ["out/b.py"]) == ["out/b.py"]


@pytest.mark.skipif(os.name == "nt", reason="FIFOs")
@pytest.mark.parametrize("make_gitignore", [os.mkfifo, os.mkdir], ids=["fifo", "folder"])
def test_an_unreadable_gitignore_is_reported_and_its_patterns_not_applied(tmp_path, make_gitignore):
    make(tmp_path, "a.py", "sub/ignored.py")
    make_gitignore(tmp_path / "sub" / ".gitignore")
    with deadline():
        result = discover(["."], root=tmp_path, exclude=compile_patterns([]), cwd=tmp_path)
    assert [shown for _, shown in result.files] == ["a.py", "sub/ignored.py"]
    [message] = result.unreadable
    assert message.startswith("cannot read sub/.gitignore: not a regular file (")
    assert message.endswith("); its patterns are not applied")


@pytest.mark.skipif(os.name == "nt", reason="FIFOs")
def test_an_unreadable_gitignore_above_named_files_is_reported_once(tmp_path):
    make(tmp_path, "sub/a.py", "sub/b.py")
    os.mkfifo(tmp_path / ".gitignore")
    with deadline():
        result = discover(["sub/a.py", "sub/b.py", "sub"], root=tmp_path, exclude=compile_patterns([]),
                          cwd=tmp_path, force_exclude=True)
    assert [shown for _, shown in result.files] == ["sub/a.py", "sub/b.py"]
    assert result.unreadable == ["cannot read .gitignore: not a regular file (a FIFO); its patterns are not applied"]


def test_a_gitignore_decides_as_its_last_matching_pattern():
    """The patterns of a .gitignore, searched as one expression, decide as git does: the last
    pattern that matches, `!` re-including; compared with pathspec's pattern by pattern."""
    from lint_nograd.run.files import _GitIgnore, _gitignore_spec

    lines = ["*.py[cod]", "build/", "/top.py", "docs/**/gen_*.py", "!docs/keep/gen_main.py", "tmp*",
             "!tmp_keep.py", "a/b/", "**/cache/", "\\#odd.py", "name with space.py", "[!x]y.py", "", "# comment"]
    spec = _gitignore_spec(lines)
    ours = _GitIgnore(Path("/project"), lines + ["!", "bad\\"])  # two patterns git skips
    paths = ["x.pyc", "m.py", "build/", "build/x.py", "sub/build/", "top.py", "sub/top.py", "docs/a/gen_x.py",
             "docs/keep/gen_main.py", "tmp1.py", "tmp_keep.py", "a/b/", "a/b/c.py", "x/cache/", "#odd.py",
             "name with space.py", "ay.py", "xy.py", "docs/gen_y.py"]
    for path in paths:
        expected = next((p.include for p in reversed(spec.patterns)
                         if p.include is not None and p.match_file(path) is not None), None)
        assert ours.verdict_for(path) == expected, path
    assert _GitIgnore(Path("/project"), ["# only a comment"]).verdict_for("m.py") is None
