"""A run of `check` over the whole project: which files are read, summarised and linked, in which process,
and what the cache spares.

1. Every file of the project is known by its text index (`torch_names.TextIndex`): from the cache when its
   status is unchanged, else read (by worker processes when there are many). A file given on the
   command line that some rule can apply to by itself is summarised as it is read.
2. Summarised too: the files that may apply a transform or tracer, or that are given and may call
   backward, and whose imports lead to a file that names a grad-disabling API, directly or through
   other modules of the project.
3. Linked, in this process. A module a chain enters (or a backward site's callee) is summarised
   when it is first met. Files that pass a function to a helper that transforms it are found by
   that function's name and summarised in turn.
4. Finished (by workers again): the findings linking gives each file given, with their fixes.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

from lint_nograd.analysis import library, torch_names
from lint_nograd.project.linking import ModuleEntry, Project, made_by, module_name_and_root, script_relative
from lint_nograd.project.summary import ModuleSummary, passes_from_json
from lint_nograd.report import suppression
from lint_nograd.report.diagnostics import Diagnostic
from lint_nograd.run import engine
from lint_nograd.run.cache import Cache, content_key, diagnostics_from_json, diagnostics_to_json, file_status
from lint_nograd.run.jobs import CHUNK_FILES, Fixes, Job, Outcome
from lint_nograd.run.notebook import Notebook, NotebookError
from lint_nograd.run.regular_file import read_regular_file
from lint_nograd.run.workers import Workers, collector_paused

SUMMARY_CHUNK_FILES = 4  # files summarised by a worker at once (a text index is cheaper: CHUNK_FILES)
AHEAD_LEVELS = 2  # how many steps away modules are summarised before linking asks for them


def run(jobs: Sequence[Job], project_files: Sequence[tuple[Path, str]], roots: Sequence[Path], workers: int,
        cache: Cache, fixes: Fixes | None, everything: bool = False) -> "Run":
    """Stages 1 to 4 above."""
    _CACHE[:] = [cache]
    with collector_paused(), Workers(workers) as pool:
        found = Run(jobs, project_files, roots, pool, cache, everything)
        found.finish(found.linked(), fixes)
    cache.save()
    return found


def reach(jobs: Sequence[Job], project_files: Sequence[tuple[Path, str]], roots: Sequence[Path], workers: int,
          cache: Cache) -> tuple[dict[Path, engine.Reach], list[str]]:
    """For each file of `jobs`, what reaches each of its functions in the whole project (for `fix`),
    and the errors met."""
    _CACHE[:] = [cache]
    with collector_paused(), Workers(workers) as pool:
        run = Run(jobs, project_files, roots, pool, cache)
        project = run.linked()
    cache.save()
    found: dict[Path, engine.Reach] = {}
    shown = {file.module: file.shown for file in run.by_module.values()}

    def by_path(reacher):  # a file fixed on its own knows no other module: its findings name places by path
        via = reacher.via and (shown.get(reacher.via[0], reacher.via[0]), *reacher.via[1:])
        return replace(reacher, module=shown.get(reacher.module, reacher.module), via=via)

    for job in jobs:
        module = run.files[job.path].module
        found[job.path] = {function: {mode: by_path(reacher) for mode, reacher in modes.items()}
                           for (m, function), modes in project.reached.items() if m == module}
    return found, run.outcome.errors


@dataclass
class ProjectFile:
    path: Path
    shown: str
    module: str
    is_package: bool
    job: Optional[Job] = None  # the file was given: check it with these rules
    content_key: str = ""
    index: Optional[torch_names.TextIndex] = None
    facts: Optional[engine.FileFacts] = None
    summarised: bool = False  # its facts were asked for (they are None when it cannot be read)
    root: int = 0  # the index of the import root it is named from
    makers: tuple = ()  # the grad-mode makers it imports from other modules (`engine.Makers`'s items)

    @property
    def task(self) -> tuple:
        return self.path, self.shown, self.job, self.makers


class Run:
    def __init__(self, jobs: Sequence[Job], project_files: Sequence[tuple[Path, str]], roots: Sequence[Path],
                 workers: "Workers", cache: Cache, everything: bool = False):
        self.workers, self.cache, self.everything = workers, cache, everything
        self.outcome = Outcome()
        self.files: dict[Path, ProjectFile] = {}
        for path, shown in project_files:
            self._add(path, shown, roots)
        for job in jobs:
            file = self._add(job.path, job.display_path, roots)
            file.job, file.shown = job, job.display_path  # as the user named it
        self.by_module: dict[str, ProjectFile] = {}
        for file in sorted(self.files.values(), key=lambda file: file.root):  # the first root wins
            self.by_module.setdefault(file.module, file)
        self._importers: dict[str, set[str]] | None = None
        self._importing_kept: dict[str, frozenset[str]] = {}
        self.findings: dict[Path, list[Diagnostic]] = {}  # of each file given, once finished
        self.found: dict[Path, list[engine.Linked]] = {}  # what linking gave each file given
        self._ahead: dict[Path, tuple] = {}  # facts made before linking asks for them, and their summary if read
        self._words: dict[Path, frozenset[bytes]] = {}  # the words of the files looked into for names
        self._called: dict[Path, frozenset[bytes]] = {}  # and those a call site may end with (`called_words`)
        self._shared: dict = {}  # the refs of the summaries read from the cache, kept once each
        self._lines: dict[str, list[str] | None] = {}  # of the modules whose directives were looked at

    def _add(self, path: Path, shown: str, roots: Sequence[Path]) -> ProjectFile:
        if path not in self.files:
            name, package, root = module_name_and_root(path, roots)
            self.files[path] = ProjectFile(path, shown, name, package, root=root)
        return self.files[path]

    def linked(self) -> Project:
        """Stages 1 to 3."""
        self.index()
        makers = self.give_makers()
        self.summarise([f for f in self.files.values() if not f.summarised and (
            self.everything or self.worth_summarising(f) or f.makers and f.job is not None or f.module in makers)])
        return self.link()

    # -- stage 1: the text index of every file -----------------------------------------------------

    def index(self) -> None:
        unknown = []
        for file in self.files.values():
            key = self.cache.known(file.path) if file.job is None or file.job.data is None else None
            index = _index_from(self.cache.entry(key)) if key else None
            if index is None:
                unknown.append(file)
                continue
            file.content_key, file.index = key, index
            if file.job is not None:
                self._take_facts(file)
        results = self.workers.map(read_file, [f.task for f in unknown],
                                   lambda path, shown, *rest: (None, "", None, None, _stopped(shown)), CHUNK_FILES)
        for file, (status, key, index, facts, error) in zip(unknown, results):
            if error is not None:
                self._failed(file, error)
                continue
            file.content_key, file.index = key, torch_names.TextIndex.from_json(index)
            self.cache.record(file.path, status, key)
            if self.cache.folder is not None:
                self.cache.entry(key)["index"] = index
            if facts is not None:
                self._store_facts(file, facts)
            elif file.job is not None:
                self._take_facts(file)

    def give_makers(self) -> set[str]:
        """Give each file what it imports of the functions and classes of other modules that make
        a grad mode when called (`with utils.frozen():`, `@utils.frozen`), so that its model sees
        regions there as it sees those of its own makers. Its facts depend on them then: read again
        (they were read with none when it was indexed), and kept in the cache under a key of both.
        The modules defining those imported are returned: they are summarised too (a decorator's
        wrapper calls what it decorates in its region)."""
        defined = {f.module: f.index.makers for f in self.by_module.values() if f.index is not None and f.index.makers}
        used: set[str] = set()
        if not defined:
            return used
        for file in self.files.values():
            table = self._makers_imported(file, defined, used)
            if table:
                file.makers, file.index = table, replace(file.index, regions=True)
                file.content_key = f"{file.content_key}+{content_key(repr(table).encode())}"
                file.facts, file.summarised = None, False
                self._take_facts(file)
        return used

    def _makers_imported(self, file: ProjectFile, defined: dict[str, tuple], used: set[str]) -> tuple:
        """(the name the file spells, the mode `SemanticModel.region_makers` gives) for each maker of
        `defined` (by module) that an import of the file names and that the file spells: `.utils.frozen` for
        `from .utils import frozen` or `from . import utils`, also through a package re-exporting it.
        The modules of those are added to `used`."""
        found: dict[str, tuple] = {}
        modules: set[str] = set()
        for spelled in file.index.imports if file.index is not None else ():
            absolute = _absolute(file, spelled, self.by_module)
            if not absolute:
                continue
            spelled += "" if spelled.endswith(".") else "."
            for module, makers in defined.items():
                if module == absolute:
                    prefixes = [spelled]
                elif module.startswith(absolute + ".") and module != file.module:  # (a package's re-export)
                    prefixes = [spelled, f"{spelled}{module[len(absolute) + 1:]}."]
                else:
                    continue
                found.update((prefix + name, tuple(mode)) for name, *mode in makers for prefix in prefixes)
                modules.add(module)
        names = sorted({name.rpartition(".")[2] for name in found})
        key = ",".join("." + name for name in names)
        if not found or not self._mentions(file, key):
            return ()
        used |= modules
        return tuple(sorted(found.items()))

    def worth_summarising(self, file: ProjectFile) -> bool:
        """Whether a file may apply a transform or tracer to a function that leads to a region, or,
        given, may call backward on what a function of another module computes in a region (NG003 is
        reported where backward is called: the function's module is loaded when linking asks)."""
        if file.index is None:
            return False
        if file.module in self.helpers_callers:
            return True  # it may hand a helper what its caller gave it (`hutchinson(self.model, x)`)
        if file.module not in self.leading_to_regions and file.module not in self.helpers:
            return False  # (a helper leads to no region itself: what it is handed may)
        return file.index.applies or file.job is not None and file.index.backward or \
            file.index.regions and file.module in self.toward_transforms or \
            file.index.hooks and file.index.regions  # a hook it registers on a model it is given runs with it

    @functools.cached_property
    def leading_to_regions(self) -> set[str]:
        """The modules that name a grad-disabling API, and those whose imports lead to one."""
        return self._leading_to({f.module for f in self.files.values() if f.index is not None and f.index.regions})

    @functools.cached_property
    def under_regions(self) -> set[str]:
        """The modules leading to regions and those they import, directly or not."""
        found, stack = set(self.leading_to_regions), list(self.leading_to_regions)
        imported: dict[str, set[str]] = {}
        for module, importers in self.importers().items():
            for importer in importers:
                imported.setdefault(importer, set()).add(module)
        while stack:
            for module in imported.get(stack.pop(), ()):
                if module not in found:
                    found.add(module)
                    stack.append(module)
        return found

    @functools.cached_property
    def helpers(self) -> set[str]:
        """The modules that may apply a transform or tracer and that a module leading to a region
        imports, directly or not: their functions may transform what that module hands them
        (`loss(net, z, t)` with `def loss(model, z, t)` applying `jvp` to `model`)."""
        applying = {f.module for f in self.files.values() if f.index is not None and f.index.applies}
        return {module for module in applying - self.leading_to_regions if module in self.under_regions}

    @functools.cached_property
    def helpers_callers(self) -> set[str]:
        """The modules that import a helper (`helpers`) and that a module leading to a region
        imports in turn, directly or not: the model may come in through a parameter or an attribute
        (`ScoreMatching(model)` in a script, whose `__call__` gives `self.model` to the helper)."""
        importing = {importer for module in self.helpers for importer in self.importers().get(module, ())}
        return {module for module in importing - self.leading_to_regions - self.helpers
                if module in self.under_regions}

    @functools.cached_property
    def transforming(self) -> set[str]:
        """The modules that may apply a transform or tracer (to a helper's parameter, say), and
        those that import one (a helper that hands its parameter on to such a helper)."""
        applying = {f.module for f in self.files.values() if f.index is not None and f.index.applies}
        return applying | {importer for module in applying for importer in self.importers().get(module, ())}

    @functools.cached_property
    def toward_transforms(self) -> set[str]:
        """The modules that may apply a transform or tracer, or call backward (on what a function
        called in a region computes: NG003), and those whose imports lead to one."""
        return self._leading_to({f.module for f in self.files.values()
                                 if f.index is not None and (f.index.applies or f.index.backward)})

    def _leading_to(self, found: set[str], known: frozenset[str] = frozenset()) -> set[str]:
        """`found` and the modules whose imports lead to one of them, but for `known`, a set
        already closed under importing."""
        stack = list(found)
        while stack:
            for importer in self.importers().get(stack.pop(), ()):
                if importer not in found and importer not in known:
                    found.add(importer)
                    stack.append(importer)
        return found

    def _importing(self, module: str) -> frozenset[str]:
        """`_leading_to({module, *_packages(module)})`, kept: the walk from a module stops at what
        leads to its package already (on torch, nearly every module leads to `torch`)."""
        if module not in self._importing_kept:
            package = module.rpartition(".")[0]
            known = self._importing(package) if package else frozenset()
            found = self._leading_to({module} - known, known)
            self._importing_kept[module] = frozenset(found | known)
        return self._importing_kept[module]

    def importers(self) -> dict[str, set[str]]:
        """For each module, the modules whose imports may bring it in."""
        if self._importers is None:
            self._importers = {}
            packages: dict[str, list[str]] = {}
            for module in self.by_module:
                parts = module.split(".")
                for end in range(1, len(parts)):
                    packages.setdefault(".".join(parts[:end]), []).append(module)
            for file in self.files.values():
                for target in self._imported(file, packages):
                    self._importers.setdefault(target, set()).add(file.module)
        return self._importers

    def _imported(self, file: ProjectFile, packages: dict[str, list[str]]) -> set[str]:
        """The modules of the project an import of the file names, their packages, and every
        module of a package imported whole (`import pkg` then `pkg.model.loss`)."""
        found: set[str] = set()
        for name in file.index.imports if file.index else ():
            absolute = _absolute(file, name, self.by_module)
            while absolute:
                if absolute in self.by_module:
                    found.add(absolute)
                    if not name.startswith(".") and "." not in name:
                        found.update(packages.get(absolute, ()))
                absolute = absolute.rpartition(".")[0]
        return found

    # -- stage 2: facts -----------------------------------------------------------------------------

    def summarise(self, files: list[ProjectFile]) -> None:
        for file in files:
            if file.path in self._ahead:
                self._store_facts(file, *self._ahead.pop(file.path))
        pending = sorted((file for file in files if not file.summarised and not self._take_facts(file)),
                         key=_size, reverse=True)
        # the largest first, a few at a time: one file may take as long as a hundred others
        results = self.workers.map(summarise_file, [f.task for f in pending],
                                   lambda path, shown, *rest: (None, _stopped(shown)), SUMMARY_CHUNK_FILES)
        for file, (facts, error) in zip(pending, results):
            if error is not None:
                self._failed(file, error)
            else:
                self._store_facts(file, facts)

    def _failed(self, file: ProjectFile, error: str) -> None:
        file.summarised = True
        if file.job is not None:  # a file of the project that was not given is only context
            self.outcome.errors.append(error)

    def _store_facts(self, file: ProjectFile, facts: tuple[list, dict | None], read: ModuleSummary | None = None) -> None:
        """Keep a file's facts (and in the cache); `read`: its summary read already."""
        local, summary = facts
        stored = {"summary": summary, "local": {facts_key(file.job): local} if file.job is not None else {}}
        if self.cache.folder is not None:  # without a cache, the summary is not kept twice
            entry = self.cache.entry(file.content_key)
            entry["summary"] = summary
            entry.setdefault("local", {}).update(stored["local"])
        if not self._take_facts(file, stored, read):
            file.summarised = True  # it cannot be read back: a bug, but not one to loop on

    def _take_facts(self, file: ProjectFile, entry: dict | None = None, read: ModuleSummary | None = None) -> bool:
        """Take a file's facts from `entry` or its cache entry; False when they are not there (or not whole)."""
        entry = entry if entry is not None else self.cache.entry(file.content_key)
        if "summary" not in entry:
            return False
        local: list[Diagnostic] | None = []
        if file.job is not None:
            local = diagnostics_from_json(entry.get("local", {}).get(facts_key(file.job)), file.shown)
        try:
            summary = read if read is not None else \
                ModuleSummary.from_json(entry["summary"], self._shared) if entry["summary"] is not None else None
        except (KeyError, TypeError, ValueError, AttributeError):
            return False
        if local is None:
            return False
        file.facts, file.summarised = engine.FileFacts(local, summary), True
        return True

    # -- stage 3: linking ---------------------------------------------------------------------------

    def link(self) -> Project:
        """Link; then summarise the files found to call a helper by name, and link again. Each round
        starts from the modules summarised before linking and the callers found since: a module the
        round before only looked into starts nothing (as in the first round), whatever it loaded."""
        seeds = {m for m, f in self.by_module.items() if f.facts and f.facts.summary}
        handed: set[str] = set()  # modules with regions that calls hand a function applying a transform
        ahead = True
        while True:
            modules = {f.module: ModuleEntry(f.module, f.shown, f.is_package, f.facts and f.facts.summary,
                                             loaded=f.summarised) for f in self.by_module.values()}
            project = Project(modules, self._load, None if self.everything else self.leading_to_regions,
                              None if self.everything else self.transforming,
                              None if self.everything else self.toward_transforms | handed,
                              None if self.everything else self.under_regions, self._passes)
            if ahead and self.workers.count > 1:  # in one process, ahead is only more work
                self._summarise_ahead(project, sorted(seeds))
            ahead = False
            project.link(sorted(seeds))
            callers = self._callers_by_name(project) + self._regions_calling(project)
            more = set() if self.everything else {  # what their calls run may be what is handed: linked again
                module for module in project.handed_what_applies() - self.toward_transforms - handed
                if (file := self.by_module.get(module)) is not None and file.index is not None and file.index.regions}
            handed |= more
            callers += [file for module in sorted(more) if not (file := self.by_module[module]).summarised
                        and file not in callers]
            if not callers and not more:
                self._words.clear()  # no more names to look for
                self._called.clear()
                self._shared.clear()  # no more summaries to read
                return project
            self.summarise(callers)
            seeds.update(f.module for f in callers if f.facts and f.facts.summary)

    def _summarise_ahead(self, project: Project, modules: list[str]) -> None:
        """Summarise in worker processes the modules linking is likely to load one at a time: those
        the summarised modules transform or call helpers of, then those these lead to in turn. They
        are kept aside and taken when linking asks (or not at all): what is linked stays the same."""
        summaries = [(module, self.by_module[module].facts.summary) for module in modules]
        looked = set(modules)
        for level in range(AHEAD_LEVELS):
            wanted = {m for module, summary in summaries for m in project.modules_to_look_into(module, summary)} - looked
            looked |= wanted
            files = sorted((self.by_module[m] for m in wanted if not self.by_module[m].summarised
                            and "summary" not in (self.cache.peek(self.by_module[m].content_key) or {})),
                           key=_size, reverse=True)
            results = self.workers.map(summarise_file, [f.task for f in files],
                                       lambda path, shown, *rest: (None, _stopped(shown)), SUMMARY_CHUNK_FILES)
            summaries = []
            for file, (facts, error) in zip(files, results):
                if error is None:  # else summarised again when asked for, and the error told then
                    summary = None
                    if level + 1 < AHEAD_LEVELS and facts[1] is not None:  # read once, kept to link
                        summary = ModuleSummary.from_json(facts[1], self._shared)
                        summaries.append((file.module, summary))
                    self._ahead[file.path] = facts, summary

    def _load(self, entry: ModuleEntry) -> ModuleSummary | None:
        """A module a chain enters is summarised when it is first met."""
        file = self.by_module[entry.name]
        if not file.summarised:
            self.summarise([file])
        return file.facts.summary if file.facts else None

    def _passes(self, entry: ModuleEntry) -> dict:
        """What each call of a module linking follows passes (`summary.passes_of`), read once a
        content; {} when it cannot be read."""
        file = self.by_module[entry.name]
        cached = self.cache.entry(file.content_key) if file.content_key else {}
        if "passes" not in cached:
            try:
                data = _source(file.path, file.job)
            except OSError:
                return {}
            try:
                cached["passes"] = engine.passes(data, file.shown, dict(file.makers))
            except Exception:  # a bug with one file must not stop the run: its calls vary everything
                return {}
        try:
            return passes_from_json(cached["passes"], self._shared)
        except (KeyError, TypeError, ValueError):
            return {}

    def _callers_by_name(self, project: Project) -> list[ProjectFile]:
        """Files not summarised yet that import the module of a helper handing a parameter to a
        transform or tracer (or a package of it), and that name that function."""
        wanted: dict[str, set[str]] = {}  # module -> names
        for (module, function, _), use in project.helpers():
            if use.sourced:
                wanted.setdefault(module, set()).add(function)
        for module, function, _ in project.transformed_parameters():  # whatever a call passes them is reached
            wanted.setdefault(module, set()).add(function)
        for module, function in project.callers_wanted():  # what they pass is stored and run
            wanted.setdefault(module, set()).add(function)
        found = []
        for module, names in sorted(wanted.items()):
            methods = any("." in name and not name.endswith(".__init__") for name in names)
            key = ",".join(sorted({spelled for name in names if (spelled := _spelled(name, called=True))}))
            importers = set(self.importers().get(module, ()))
            for package in _packages(module):  # `from pkg import hvp` re-exported by pkg/__init__.py
                importers |= self.importers().get(package, set())
            if methods:  # through any number of modules: `Net().export(x)` with `export` in a base of `Net`
                importers = {m for m in self._importing(module) if m in self.by_module}
            importers.discard(module)
            # what a file passes leads to a region only if its imports lead to one, or if a file
            # leading to one hands it a function to pass on
            for importer in sorted(importers & self.under_regions):
                file = self.by_module[importer]
                if not file.summarised and file.index is not None and key and self._mentions(file, key):
                    found.append(file)
        return list({file.path: file for file in found}.values())

    def _regions_calling(self, project: Project) -> list[ProjectFile]:
        """Files with a region, not summarised yet, that name a function applying a transform
        itself (`evaluate` running `self.residual.pde_residual(z)` under `@torch.no_grad()`): the
        call in the region may be that function, on an object it is given (NG001)."""
        names = sorted(project.names_applying())
        key = ",".join("." + name for name in names)
        return [file for module, file in sorted(self.by_module.items())
                if names and not file.summarised and file.index is not None and file.index.regions
                and module in self.under_regions and self._mentions(file, key)]

    def _mentions(self, file: ProjectFile, key: str) -> bool:
        """Whether the file spells one of the comma-separated spellings of `key` (`spells`), as the
        cache keeps them."""
        mentions = self.cache.entry(file.content_key).setdefault("mentions", {})
        if key not in mentions:
            words = self._words.get(file.path)
            if words is None:  # read once, however many names are looked for in it
                code = self._code(file)
                if code is None:
                    return False
                words = self._words[file.path] = words_of(code)
            mentions[key] = spells(words, key, lambda: self._called_words(file))
        return mentions[key]

    def _called_words(self, file: ProjectFile) -> frozenset[bytes]:
        if file.path not in self._called:
            self._called[file.path] = called_words(self._code(file) or b"")
        return self._called[file.path]

    def _code(self, file: ProjectFile) -> bytes | None:
        try:
            return code_of(_source(file.path, file.job), file.shown)
        except OSError:
            return None

    def lines_of(self, module: str) -> list[str] | None:
        """The lines of a module's file, read once, for its `# noqa` directives (None: unreadable)."""
        if module not in self._lines:
            file = self.by_module.get(module)
            try:
                self._lines[module] = None if file is None or file.shown.endswith(".ipynb") else \
                    engine.text_lines(engine.decode(_source(file.path, file.job))[0])
            except (OSError, engine.ParseError):
                self._lines[module] = None
        return self._lines[module]

    # -- stage 4: finished findings -----------------------------------------------------------------

    def finish(self, project: Project, fixes: Fixes | None) -> None:
        given = frozenset(f.module for f in self.files.values() if f.job is not None)
        pending = []
        for file in self.files.values():
            if file.job is None or file.facts is None:
                continue
            self.findings[file.path] = list(file.facts.local)
            if self.by_module.get(file.module) is not file:
                continue  # a second file of the same module name: linked as the first one
            found = self.found[file.path] = engine.linked(project, file.module, given, file.job.codes, file.shown,
                                                          file.job.release, lines_of=self.lines_of)
            if not found:
                continue
            key = _link_key(file.job, found, fixes)
            stored = self.cache.entry(file.content_key).get("finished", {})
            finished = diagnostics_from_json(stored[key], file.shown) if key in stored else None
            if finished is None:
                pending.append((file, key, found))
            else:
                self.findings[file.path] += finished
        results = self.workers.map(finish_file, [(*f.task, found, fixes) for f, _, found in pending],
                                   lambda path, shown, *rest: (None, _stopped(shown)), CHUNK_FILES)
        for (file, key, _), (diagnostics, error) in zip(pending, results):
            if error is not None:
                self.outcome.errors.append(error)
                continue
            self.cache.entry(file.content_key).setdefault("finished", {})[key] = diagnostics
            self.findings[file.path] += diagnostics_from_json(diagnostics, file.shown) or []
        for path, found in self.findings.items():  # a `# noqa` seen by both stages: NG100 settles it
            self.outcome.diagnostics += suppression.settle(found, self.files[path].job.codes)


def mentions_any(data: bytes, names: str, shown: str) -> bool:
    """Whether the file's code spells one of the comma-separated `names` (`spells`)."""
    return spells(_code_words(data, shown), names, lambda: called_words(code_of(data, shown)))


def spells(words: frozenset[bytes], names: str, called: Callable[[], frozenset[bytes]]) -> bool:
    """Whether `words` (`words_of`) hold one of the comma-separated `names`: a word, `.name` (as an
    attribute, or imported by name), or `(.name`: so, and a call site may end with it (`called`: the
    file's `called_words`, found when first needed)."""
    for name in names.split(","):
        if name[:1] == "(":
            if name[1:].encode() in words and name[2:].encode() in called():
                return True
        elif name.encode() in words:
            return True
    return False


@functools.lru_cache(maxsize=1)  # a changed file is asked about each name searched in it
def _code_words(data: bytes, shown: str) -> frozenset[bytes]:
    return words_of(code_of(data, shown))


def words_of(data: bytes) -> frozenset[bytes]:
    """Its words, and each word read as an attribute or imported by name with a dot (`.set` in
    `thunk.set(spec)` or `getattr(thunk, "set")`, `.hvp` for `from .ops import hvp`; every word
    after `from m import *`)."""
    words = frozenset(_WORD.findall(data))
    named = set(_ATTRIBUTE.findall(data)) | set(_GETATTR.findall(data))
    for module, names in torch_names.import_statements(data):
        if module is not None:
            named.update(words if b"*" in names else _WORD.findall(names))
    return words | frozenset(b"." + word for word in named)


def called_words(data: bytes) -> frozenset[bytes]:
    """The words a call site may end with: called (`self.step(x)`, `@helpers.step`), imported by name
    or read by `getattr`, bound to another name (`run = self.step`), or handed to a call (which may
    call it: `checkpoint(self.step, x)`, `partial(step, net)`, `map(step, xs)`); not `def step(self)`
    nor `model.graph.nodes`."""
    found = {*_CALLED.findall(data), *_BOUND.findall(data), *_GETATTR.findall(data)}
    for module, names in torch_names.import_statements(data):
        if module is not None:
            found.update(_WORD.findall(data) if b"*" in names else _WORD.findall(names))
    for words in (*_DECORATOR.findall(data), *_HANDED.findall(data)):
        found.update(_WORD.findall(words))
    return frozenset(found)


def code_of(data: bytes, shown: str) -> bytes:
    """A file's code: a notebook's cells, whose imports a word search must read as code."""
    if shown.endswith(".ipynb"):
        try:
            return Notebook.read(data).source.encode()
        except NotebookError:
            pass
    return data


def _spelled(function: str, called: bool = False) -> str:
    """What a file calling `function` spells, when it is not the file defining it: the name
    `made_by` gives, read as an attribute or imported by name (`.set` in `thunk.set(spec)`, `.hvp`
    in `from ops import hvp`): a file using the builtin `set()` only does not call
    `PytreeThunk.set`; with `called`, where a call site may end with it too (`(.set`: a file
    that only defines its own `def set(self)` does not call it either). A dunder method runs on an
    instance: the class is spelled (`Net.__call__`, `.Net`); "" when nothing names it (a lambda)."""
    parts = function.split("#")[0].split(".")
    if len(parts) > 1 and parts[-1].startswith("__") and "<locals>" not in parts:
        return "." + parts[-2] if parts[-2].isidentifier() else ""
    name = made_by(function)
    return name and ("(." if called else ".") + name


_WORD = re.compile(rb"\w+")
_ATTRIBUTE = re.compile(rb"\.\s*(\w+)")
_GETATTR = re.compile(rb"\bgetattr\s*\([^,]*,\s*[\"'](\w+)[\"']")
_CALLED = re.compile(rb"(?<!def )\b(\w+)\s*\(")
_BOUND = re.compile(rb"=\s*(?:[\w.]*\.)?(\w+)\s*(?:#.*)?$", re.MULTILINE)
# the library calls that call a function they are given (a call site of it where they are called:
# `summary.py`): `checkpoint(self.step, x)`, `partial(step, net)`, `map(step, xs)`, `sorted(xs, key=step)`
_CALLERS = sorted({name.rpartition(".")[2] for table in (library.CALLS_ARGUMENT, library.CALLS_ON_ELEMENTS)
                   for name in table} | {name.rpartition(".")[2] for name in torch_names.PARTIAL} | library.REGISTERS_HOOK)
_HANDED = re.compile(rb"\b(?:" + "|".join(_CALLERS).encode() + rb")\s*\(([^()]*)")  # (their arguments, up to a call)
_DECORATOR = re.compile(rb"^[ \t]*@([\w. \t]+)", re.MULTILINE)


def _size(file: ProjectFile) -> int:
    try:
        return file.path.stat().st_size
    except OSError:
        return 0


def facts_key(job: Job) -> str:
    """What the local findings of a file depend on besides its bytes: the rules and the release."""
    return f"{job.release}:{','.join(sorted(job.codes))}"


def _link_key(job: Job, found: list, fixes: Fixes | None) -> str:
    """What the finished findings of a file depend on besides its bytes."""
    return repr((facts_key(job), fixes.cache_key if fixes else None,
                 [(index, d.code, d.severity, d.message, d.row, d.col, d.related) for index, d in found]))


def _index_from(entry: dict) -> torch_names.TextIndex | None:
    try:
        return torch_names.TextIndex.from_json(entry["index"])
    except (KeyError, TypeError, ValueError):
        return None


def _packages(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:end]) for end in range(1, len(parts))]


def _absolute(file: ProjectFile, name: str, modules) -> str | None:
    """`pkg.model` for `.model` imported in `pkg/train.py`; `scripts.config` for `config` in
    `scripts/train.py` (`linking.script_relative`)."""
    if not name.startswith("."):
        return script_relative(file.module, name, modules)
    if file.module.startswith("<"):
        return None
    rest = name.lstrip(".")
    package = file.module.split(".") if file.is_package else file.module.split(".")[:-1]
    up = len(name) - len(rest) - 1
    if up > len(package):
        return None
    base = package[:len(package) - up]
    return ".".join([*base, rest] if rest else base)


def _stopped(shown: str) -> str:
    return f"a worker process stopped unexpectedly; not checked: {shown}"


# -- what worker processes do (module-level functions: they are sent by name) ------------------------

def _source(path: Path, job: Job | None) -> bytes:
    return job.data if job is not None and job.data is not None else read_regular_file(path)


def read_file(path: Path, shown: str, job: Job | None, imported: tuple = ()):
    """(status, content key, text index, facts or None, error) of one file; the facts when the
    file is given and some rule can apply to it by itself, read with none of the grad-mode makers it
    imports (`imported` is empty: `give_makers` comes after the index)."""
    status = file_status(path) if job is None or job.data is None else None  # before reading: never newer
    try:
        data = _source(path, job)
    except OSError as error:  # removed since it was found, a broken link, a folder, ...
        return None, "", None, None, f"cannot read {shown}: {error.strerror or error}"
    scan = torch_names.Scan(code_of(data, shown))  # a notebook's imports are read in its cells
    key, facts, error, makers = content_key(data), None, None, None
    if job is not None and (codes := local_codes(data, shown, job.codes, scan)) and not _known_facts(key, job):
        facts, error, makers = _facts(data, shown, codes, job.release, find_makers=_may_make(shown, scan))
    return status, key, index_of(data, shown, scan, makers).to_json(), facts, error


def index_of(data: bytes, shown: str, scan: torch_names.Scan, makers: tuple | None = None) -> torch_names.TextIndex:
    """A file's text index, with the grad-mode makers it defines for other modules to import
    (`makers`: found already, as its facts were)."""
    index = scan.index()
    if _may_make(shown, scan):
        index = replace(index, makers=engine.region_makers(data) if makers is None else makers)
    return index


def _may_make(shown: str, scan: torch_names.Scan) -> bool:
    return scan.regions and not shown.endswith(".ipynb") and torch_names.may_make_regions(scan.data)


_CACHE: list[Cache] = []  # the run's cache, which worker processes inherit when they are forked


def _known_facts(key: str, job: Job) -> bool:
    """Whether the cache has this file's facts by its content (a file touched but not changed)."""
    entry = _CACHE[0].peek(key) if _CACHE else None
    return isinstance(entry, dict) and "summary" in entry and facts_key(job) in entry.get("local", {})


def summarise_file(path: Path, shown: str, job: Job | None, makers: tuple = ()):
    """(facts, error) of one file."""
    try:
        data = _source(path, job)
    except OSError as error:
        return None, f"cannot read {shown}: {error.strerror or error}"
    return file_facts(data, shown, job, makers)


def file_facts(data: bytes, shown: str, job: Job | None, makers: tuple = ()):
    """(facts, error) of a file's bytes: its summary, and its own findings when it is given."""
    codes = frozenset()
    if job is not None:
        scan = torch_names.Scan(code_of(data, shown))
        scan.regions = scan.regions or bool(makers)  # a grad-mode maker it imports makes a region too
        codes = local_codes(data, shown, job.codes, scan)
    return _facts(data, shown, codes, job.release if job else "", makers)[:2]


def local_codes(data: bytes, shown: str, codes: frozenset[str], scan: torch_names.Scan | None = None) -> frozenset[str]:
    """The rules a given file can have a finding of by itself; for a notebook, the cells decide."""
    return codes if shown.endswith(".ipynb") else engine.codes_to_check(data, codes, scan)


def _facts(data: bytes, shown: str, codes: frozenset[str], torch_version: str, makers: tuple = (),
           find_makers: bool = False):
    """(facts, error, the grad-mode makers it defines when `find_makers`, else None) of a file's
    bytes, with its own findings of `codes` (gated already)."""
    try:
        found = engine.facts(data, shown, codes, torch_version=torch_version or None, makers=dict(makers),
                             find_makers=find_makers)
    except Exception as error:  # a bug with one file must not stop the others
        return None, f"failed to check {shown}: internal error: {type(error).__name__}: {error}", None
    facts = (diagnostics_to_json(found.local), found.summary.to_json() if found.summary else None)
    return facts, None, found.makers if find_makers else None


def finish_file(path: Path, shown: str, job: Job, makers: tuple, found: list, fixes: Fixes | None):
    """(finished findings, error) of one file."""
    try:
        data = _source(path, job)
    except OSError as error:
        return None, f"cannot read {shown}: {error.strerror or error}"
    try:
        attach_fixes = fixes.attach_fixes if fixes is not None else None
        return diagnostics_to_json(engine.finish(data, shown, job.codes, found, attach_fixes, dict(makers))), None
    except Exception as error:  # a bug with one file must not stop the others
        return None, f"failed to check {shown}: internal error: {type(error).__name__}: {error}"
