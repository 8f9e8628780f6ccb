"""`check` over a project, and what the last run spares.

The last run's findings are kept (`LastRun`), with what linking read of each file. A run over the
same files with the same options looks at their status only: an unchanged project is answered at
once. A file changed since is read again; when linking reads it as before (the same text index, and
the same summary or the same answers to the name searches made of it), linking would give what it
gave, and only that file's own findings are made again. Otherwise, or past a few such files, the
whole project is run (`stages`, which the cache spares most of the work of).
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lint_nograd.report import suppression
from lint_nograd.run.cache import (
    RACY_NS,
    Cache,
    FileStatus,
    content_key,
    diagnostics_from_json,
    diagnostics_to_json,
    file_status,
)
from lint_nograd.run.jobs import CHUNK_FILES, Fixes, Job, Outcome
from lint_nograd.run.regular_file import read_regular_file

if TYPE_CHECKING:
    from lint_nograd.run.engine import Reach
    from lint_nograd.run.stages import Run

def check(jobs: Sequence[Job], project_files: Sequence[tuple[Path, str]], roots: Sequence[Path], workers: int,
          cache: Cache, fixes: Fixes | None = None, everything: bool = False) -> Outcome:
    """Check the files of `jobs` as part of the project made of `project_files` (path, shown); the
    fixable findings get the fixes `fixes` makes (none: no fixes). `everything` summarises every file, not only those
    that can matter (tests compare the two)."""
    key = _run_key(jobs, project_files, roots, fixes, everything) if cache.folder is not None else None
    statuses = {path: file_status(path) for path in {*(p for p, _ in project_files), *(j.path for j in jobs)}}
    last, again = _last_run(cache, key), None
    try:
        again = last and last.again(statuses, jobs, project_files, fixes, cache)
    except (KeyError, TypeError, ValueError, AttributeError):  # written otherwise: run the project again
        again = None
    if again is None:
        from lint_nograd.run import stages  # the analysis itself: an unchanged project needs none of it

        run = stages.run(jobs, project_files, roots, workers, cache, fixes, everything)
        outcome, last = run.outcome, LastRun.of(run) if key else None
    else:
        outcome = again[0]
    if last is not None and (again is None or again[1]) and not outcome.errors and None not in statuses.values():
        cache.save_last_run(last.to_json(key, statuses))
    outcome.diagnostics.sort(key=lambda d: d.sort_key)
    return outcome


def _last_run(cache: Cache, key: str | None) -> LastRun | None:
    stored = cache.last_run(key) if key else None
    try:
        return LastRun.from_json(stored) if stored else None
    except (KeyError, TypeError, ValueError):
        return None


def reach(jobs: Sequence[Job], project_files: Sequence[tuple[Path, str]], roots: Sequence[Path], workers: int,
          cache: Cache) -> tuple[dict[Path, Reach], list[str]]:
    """For each file of `jobs`, what reaches each of its functions in the whole project (for `fix`),
    and the errors met."""
    from lint_nograd.run import stages

    return stages.reach(jobs, project_files, roots, workers, cache)


# -- the last run: what it found, and what linking read of each file --------------------------------

_LAST_RUN_MAX_CHANGED = CHUNK_FILES


@dataclass
class LastRun:
    files: dict[str, list]  # path -> [content key, hash of its text index, of its summary ("": none made), mentions]
    found: dict[str, list]  # path of a file given -> [[region index or None, diagnostic], ...]: what linking gave it
    findings: dict[str, list]  # path of a file given -> its finished findings
    statuses: dict[str, list] = field(default_factory=dict)  # path -> its status when the run began
    written: int = 0
    # the files that took a grad-mode maker from another module (`give_makers`): their facts were made with
    # it, which reading them again here does not do
    makers: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, run: Run) -> "LastRun":
        files = {}
        for file in run.files.values():
            entry = run.cache.peek(file.content_key) or {}
            summary = _hash(entry.get("summary")) if file.summarised else ""
            files[str(file.path)] = [file.content_key, _hash(file.index and file.index.to_json()), summary,
                                     {} if file.summarised else entry.get("mentions", {})]
        found = {str(path): [[index, asdict(d)] for index, d in linked] for path, linked in run.found.items() if linked}
        return cls(files, found, {str(path): diagnostics_to_json(found) for path, found in run.findings.items()},
                   makers=sorted(str(file.path) for file in run.files.values() if file.makers))

    def to_json(self, key: str, statuses: dict[Path, FileStatus]) -> dict:
        return {"key": key, "written": time.time_ns(), "files": self.files, "found": self.found,
                "findings": self.findings, "statuses": {str(path): list(status) for path, status in statuses.items()},
                "makers": self.makers}

    @classmethod
    def from_json(cls, stored: dict) -> "LastRun":
        last = cls(stored["files"], stored["found"], stored["findings"], stored["statuses"], stored["written"],
                   stored["makers"])
        if not (isinstance(last.written, int) and isinstance(last.makers, list) and all(isinstance(part, dict) for part in
                                                        (last.files, last.found, last.findings, last.statuses))):
            raise TypeError("not a last run")
        return last

    def again(self, statuses: dict[Path, FileStatus | None], jobs: Sequence[Job],
              project_files: Sequence[tuple[Path, str]], fixes: Fixes | None,
              cache: Cache) -> tuple[Outcome, bool] | None:
        """The outcome of a run over the files with these statuses, and whether any was read again; None
        when the whole project must be run again (what was learned of the files read is in `cache` then)."""
        if self.files.keys() != {str(path) for path in statuses}:
            return None
        changed = [path for path, status in statuses.items()
                   if status is None or list(status) != self.statuses.get(str(path))
                   or status[0] + RACY_NS >= self.written]  # modified just before: it may have changed since
        if len(changed) > _LAST_RUN_MAX_CHANGED or not set(self.makers).isdisjoint(map(str, changed)):
            return None  # (a maker's own module read again tells its change by its text index)
        shown = {**dict(project_files), **{job.path: job.display_path for job in jobs}}
        given = {job.path: job for job in jobs}
        learned: list[tuple[Path, FileStatus | None, str, dict]] = []
        for path in changed:
            if not self._read_again(path, shown[path], given.get(path), statuses[path], fixes, learned):
                for path, status, key, entry in learned:  # for the run of the whole project that follows
                    cache.record(path, status, key)
                    known = cache.entry(key)
                    known.update({**entry, "local": {**known.get("local", {}), **entry.get("local", {})}})
                return None
        outcome = Outcome()
        for job in jobs:
            findings = diagnostics_from_json(self.findings.get(str(job.path), []), job.display_path)
            if findings is None:
                return None
            outcome.diagnostics += suppression.settle(findings, job.codes)
        return outcome, bool(changed)

    def _read_again(self, path: Path, shown: str, job: Job | None, status: FileStatus | None, fixes: Fixes | None,
                    learned: list) -> bool:
        """Take in a file changed since: False when linking may read it differently. What is learned
        of its bytes (a cache entry) is added to `learned`."""
        from lint_nograd.analysis.torch_names import Scan
        from lint_nograd.run.stages import code_of, facts_key, file_facts, finish_file, index_of, local_codes, mentions_any

        key, index, summary, mentions = self.files[str(path)]
        try:
            data = read_regular_file(path)
        except OSError:
            return False
        if content_key(data) == key:
            return True
        scan = Scan(code_of(data, shown))
        key, entry = content_key(data), {"index": index_of(data, shown, scan).to_json()}
        learned.append((path, status, key, entry))
        if _hash(entry["index"]) != index:
            return False
        local = []
        if summary:
            facts, error = file_facts(data, shown, job)
            if error is not None:
                return False
            local, entry["summary"] = facts
            if job is not None:
                entry["local"] = {facts_key(job): local}
            if _hash(entry["summary"]) != summary:
                return False
        elif (job and local_codes(data, shown, job.codes, scan)) or \
                any(mentions_any(data, names, shown) != found for names, found in mentions.items()):
            return False
        self.files[str(path)] = [key, index, summary, mentions]
        if job is None:
            return True
        stored = self.found.get(str(path), [])
        linked = diagnostics_from_json([diagnostic for _, diagnostic in stored], shown)
        if linked is None:
            return False
        finished, error = finish_file(path, shown, job, (), [(region, d) for (region, _), d in zip(stored, linked)],
                                      fixes) if linked else ([], None)
        if error is not None:
            return False
        self.findings[str(path)] = local + finished
        return True


def _run_key(jobs: Sequence[Job], project_files: Sequence[tuple[Path, str]], roots: Sequence[Path],
             fixes: Fixes | None, everything: bool) -> str | None:
    """What a run's findings depend on besides the files' bytes; None when there is no file to compare
    (standard input)."""
    if any(job.data is not None for job in jobs):
        return None
    return content_key(repr((sorted((str(j.path), j.display_path, sorted(j.codes), j.release) for j in jobs),
                             sorted((str(path), shown) for path, shown in project_files), [str(r) for r in roots],
                             fixes.cache_key if fixes else None, everything)).encode())


def _hash(value: object) -> str:
    return hashlib.blake2b(json.dumps(value, sort_keys=True).encode(), digest_size=16).hexdigest()
