"""A security corpus: hostile and malformed files, each of which must fail with a clean
ItsmReviewError (or, at the CLI, exit 1 with one line and no traceback) that names the problem,
leave the database and the data folder exactly as they were, and finish in bounded time.
The memory bombs run in a subprocess under an address-space limit (test_bombs_*)."""

import gzip
import json
import os
import resource
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from itsmreview import settings as settings_module
from itsmreview.catalog.exporting import export_catalog
from itsmreview.catalog.importing import import_path
from itsmreview.cli import app
from itsmreview.coverage.eventlog import ColumnMapping
from itsmreview.coverage.service import import_log
from itsmreview.db import session_scope
from itsmreview.errors import ItsmReviewError
from itsmreview.schema import metadata
from sqlalchemy import func, select
from typer.testing import CliRunner

TASK = {"id": "t1", "title": "T", "persona": "P", "track": "single-agent", "instruction": "x"}
MAPPING = ColumnMapping(case="case", activity="activity", timestamp="time")
HEADER = "case,activity,time\n"
BILLION_LAUGHS_YAML = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
tasks: [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""
XES_BOMB = """<?xml version="1.0"?>
<!DOCTYPE log [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">]>
<log xes.version="1.0"><trace><string key="concept:name" value="&d;"/></trace></log>
"""
XES_EXTERNAL = """<?xml version="1.0"?>
<!DOCTYPE log [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<log xes.version="1.0"><trace><string key="concept:name" value="&secret;"/>
<event><string key="concept:name" value="a"/>
<date key="time:timestamp" value="2020-01-01T00:00:00+00:00"/></event></trace></log>
"""


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def harbor_task(folder: Path, instruction: str = "Reset the password.") -> Path:
    write(folder / "task.toml", '[task]\nname = "h1"\n')
    write(folder / "instruction.md", instruction)
    write(folder / "tests" / "test.sh", "exit 0\n")
    return folder


def symlinked_tests(tmp: Path) -> Path:
    folder = harbor_task(tmp / "h1")
    (folder / "tests" / "passwd.txt").symlink_to("/etc/passwd")
    return folder


def symlinked_tests_folder(tmp: Path) -> Path:
    folder = harbor_task(tmp / "h1")
    (folder / "solution").symlink_to("/etc")
    return folder


def symlinked_instruction(tmp: Path) -> Path:
    folder = harbor_task(tmp / "h1")
    (folder / "instruction.md").unlink()
    (folder / "instruction.md").symlink_to("/etc/passwd")
    return folder


def symlinked_task_folder(tmp: Path) -> Path:
    outside = harbor_task(tmp / "elsewhere" / "h9")
    dataset = tmp / "dataset"
    harbor_task(dataset / "h1")
    (dataset / "h9").symlink_to(outside)
    return dataset


def registry(tmp: Path, task_path: str) -> Path:
    harbor_task(tmp / "outside" / "h1")
    data = [{"name": "d", "tasks": [{"name": "h1", "path": task_path}]}]
    return write(tmp / "reg" / "registry.json", json.dumps(data))


def too_many_files(tmp: Path) -> Path:
    folder = harbor_task(tmp / "h1")
    for i in range(2001):
        write(folder / "environment" / f"f{i}.txt", "x")
    return folder


def gzip_of(text: str) -> bytes:
    return gzip.compress(text.encode())


def truncated_gzip(tmp: Path) -> Path:
    data = gzip_of(HEADER + "".join(f"c{i},a,2020-01-01T00:00:00Z\n" for i in range(5000)))
    return write(tmp / "log.csv.gz", data[: len(data) // 2])


def deep_json(depth: int) -> str:
    return "[" * depth + "]" * depth


def native_with_original(folder_name: str, files: dict) -> str:
    task = dict(
        TASK,
        original_format="harbor",
        original={
            "folder": folder_name,
            "task.toml": "[task]\n",
            "instruction.md": "x",
            "files": files,
        },
    )
    return json.dumps({"tasks": [task]})


@dataclass
class Case:
    id: str
    kind: str  # tasks | log | harbor-export
    build: Callable[[Path], Path]
    message: str  # a phrase the error must contain
    options: dict | None = None
    settings: dict | None = None


def t(name: str, content, suffix: str = ".json") -> Callable[[Path], Path]:
    return lambda tmp: write(tmp / f"{name}{suffix}", content)


CASES = [
    # task files
    Case("yaml-billion-laughs", "tasks", t("bomb", BILLION_LAUGHS_YAML, ".yaml"), "aliases"),
    Case("yaml-deep-nesting", "tasks", t("deep", "[" * 5000 + "]" * 5000, ".yaml"), "deep"),
    Case(
        "yaml-python-tag",
        "tasks",
        t("tag", "!!python/object/apply:os.system ['id']", ".yaml"),
        "invalid YAML",
    ),
    Case("json-nested-100k", "tasks", t("deep", deep_json(100_000)), "levels deep"),
    Case("json-nested-100", "tasks", t("deep", deep_json(100)), "levels deep"),
    Case("jsonl-nested-line", "tasks", t("deep", deep_json(50_000) + "\n", ".jsonl"), "line 1"),
    Case(
        "json-nul-in-field",
        "tasks",
        t("nul", json.dumps([dict(TASK, instruction="a\u0000b")])),
        "NUL",
    ),
    Case("json-nul-in-key", "tasks", t("nul", json.dumps([dict(TASK, **{"x\u0000": 1})])), "NUL"),
    Case(
        "json-nul-in-transcript",
        "tasks",
        t(
            "nul",
            json.dumps(
                [
                    dict(
                        TASK,
                        transcripts=[
                            {"id": "tr", "messages": [{"role": "user", "content": "hi\u0000"}]}
                        ],
                    )
                ]
            ),
        ),
        "NUL",
    ),
    Case("yaml-nul", "tasks", t("nul", 'tasks:\n- {id: t1, title: "\\0"}\n', ".yaml"), "NUL"),
    Case("not-utf8", "tasks", t("latin", '[{"id": "caf\xe9"}]'.encode("latin-1")), "UTF-8"),
    Case("binary-yaml", "tasks", t("bin", os.urandom(4096) + b"\xff\xfe", ".yaml"), "UTF-8"),
    Case("empty-json", "tasks", t("empty", ""), "invalid JSON"),
    Case("truncated-json", "tasks", t("cut", json.dumps([TASK])[:-7]), "invalid JSON"),
    Case(
        "field-too-long",
        "tasks",
        t("long", json.dumps([dict(TASK, instruction="x" * 500_001)])),
        "instruction",
    ),
    Case(
        "wrong-types",
        "tasks",
        t("types", json.dumps([dict(TASK, tags="a", transcripts=3)])),
        "tags",
    ),
    Case(
        "orphan-tool-result",
        "tasks",
        t(
            "tool",
            json.dumps(
                [
                    dict(
                        TASK,
                        transcripts=[
                            {
                                "id": "tr",
                                "messages": [
                                    {"role": "tool", "tool_call_id": "c9", "content": "x"}
                                ],
                            }
                        ],
                    )
                ]
            ),
        ),
        "answers no",
    ),
    Case(
        "task-file-over-limit",
        "tasks",
        t("big", json.dumps([TASK]) + " " * 5000),
        "over the limit",
        settings={"ITSMREVIEW_MAX_TASK_FILE_BYTES": "4096"},
    ),
    Case("missing-task-file", "tasks", lambda tmp: tmp / "nothing.json", "no such file"),
    Case("unknown-extension", "tasks", t("tasks", "x", ".exe"), "unknown format"),
    # Harbor folders
    Case("harbor-symlink-file", "tasks", symlinked_tests, "outside the task folder"),
    Case("harbor-symlink-folder", "tasks", symlinked_tests_folder, "links to folders"),
    Case("harbor-symlink-instruction", "tasks", symlinked_instruction, "outside the task folder"),
    Case("harbor-symlinked-task-folder", "tasks", symlinked_task_folder, "outside"),
    Case(
        "harbor-registry-dotdot",
        "tasks",
        lambda tmp: registry(tmp, "../outside/h1"),
        "leaves its folder",
    ),
    Case("harbor-registry-absolute", "tasks", lambda tmp: registry(tmp, "/etc"), "absolute"),
    Case(
        "harbor-bad-toml",
        "tasks",
        lambda tmp: write(harbor_task(tmp / "h1") / "task.toml", "[task\n").parent,
        "invalid TOML",
    ),
    Case("harbor-too-many-files", "tasks", too_many_files, "more than 2,000 files"),
    # Harbor export of stored tasks whose names would leave the destination
    Case(
        "export-folder-dotdot",
        "harbor-export",
        t("n", native_with_original("../escaped", {})),
        "leaves its folder",
    ),
    Case(
        "export-folder-absolute",
        "harbor-export",
        t("n", native_with_original("/tmp/escaped-itsmreview", {})),
        "absolute",
    ),
    Case(
        "export-folder-nested",
        "harbor-export",
        t("n", native_with_original("a/b", {})),
        "single folder",
    ),
    Case(
        "export-file-dotdot",
        "harbor-export",
        t("n", native_with_original("ok", {"tests/../../../escaped.sh": "x"})),
        "leaves its folder",
    ),
    Case(
        "export-file-absolute",
        "harbor-export",
        t("n", native_with_original("ok", {"/tmp/escaped-itsmreview.sh": "x"})),
        "absolute",
    ),
    Case(
        "export-file-backslash",
        "harbor-export",
        t("n", native_with_original("ok", {"..\\..\\escaped.sh": "x"})),
        "leaves its folder",
    ),
    # event logs
    Case("log-truncated-gzip", "log", truncated_gzip, "truncated or corrupt"),
    Case("log-not-gzip", "log", t("log", b"not gzip at all", ".csv.gz"), "truncated or corrupt"),
    Case("log-xes-not-xml", "log", t("log", "this is not xml", ".xes"), "not a well-formed XES"),
    Case("log-xes-entity-bomb", "log", t("log", XES_BOMB, ".xes"), "DTD"),
    Case("log-xes-external-entity", "log", t("log", XES_EXTERNAL, ".xes"), "DTD"),
    Case("log-parquet-garbage", "log", t("log", b"PAR1 garbage", ".parquet"), "parquet"),
    Case(
        "log-year-1500",
        "log",
        t("log", HEADER + "c1,a,1500-01-01T00:00:00Z\n", ".csv"),
        "outside the years 1970-2100 (row 2",
    ),
    Case(
        "log-year-2300",
        "log",
        t("log", HEADER + "c1,a,2020-01-01T00:00:00Z\nc1,b,2300-01-01T00:00:00Z\n", ".csv"),
        "row 3",
    ),
    Case(
        "log-year-1500-strptime",
        "log",
        t("log", HEADER + "c1,a,01/01/1500 10:00\n", ".csv"),
        "outside the years",
        options={"mapping": ColumnMapping("case", "activity", "time", "%d/%m/%Y %H:%M")},
    ),
    Case(
        "log-duplicate-header",
        "log",
        t("log", "case,activity,time,activity\nc1,a,2020-01-01T00:00:00Z,b\n", ".csv"),
        "'activity' appears 2 times",
    ),
    Case(
        "log-unknown-encoding",
        "log",
        t("log", HEADER, ".csv"),
        "unknown encoding",
        options={"mapping": ColumnMapping("case", "activity", "time", encoding="klingon")},
    ),
    Case(
        "log-wrong-encoding",
        "log",
        t("log", (HEADER + "c1,Caf\xe9,2020-01-01T00:00:00Z\n").encode("latin-1"), ".csv"),
        "log.csv: not readable as utf-8",
    ),
    Case("log-empty", "log", t("log", "", ".csv"), "empty"),
    Case("log-header-only", "log", t("log", HEADER, ".csv"), "no events"),
    Case(
        "log-50mb-field",
        "log",
        t("log", HEADER + 'c1,"' + "x" * (6 * 2**20) + '",2020-01-01T00:00:00Z\n', ".csv"),
        "a row is longer than",
    ),
    Case(
        "log-unclosed-quote",
        "log",
        t("log", HEADER + 'c1,"a,2020-01-01T00:00:00Z\n' + "c2,b,2020\n" * 10, ".csv"),
        "CSV",
    ),
    Case(
        "log-nul-in-value",
        "log",
        t("log", HEADER + "c1,a\x00b,2020-01-01T00:00:00Z\n", ".csv"),
        "NUL",
    ),
    Case("log-binary-header", "log", t("log", b"\x00" * 70_000 + b"\n", ".csv"), "NUL bytes"),
    Case(
        "log-is-a-folder",
        "log",
        lambda tmp: (tmp / "dir.csv").mkdir() or tmp / "dir.csv",
        "is a folder",
    ),
    Case("log-missing-column", "log", t("log", "case,activity\nc1,a\n", ".csv"), "not in the file"),
    Case(
        "log-ragged", "log", t("log", HEADER + "c1,a,2020-01-01T00:00:00Z,extra\n", ".csv"), "CSV"
    ),
    Case(
        "log-preset-and-columns",
        "log",
        t("log", HEADER, ".csv"),
        "fixes the columns",
        options={"preset": "bpi2013"},
    ),
    Case(
        "log-over-size-limit",
        "log",
        t("log", HEADER + "c1,a,2020-01-01T00:00:00Z\n" * 400, ".csv"),
        "over the limit",
        settings={"ITSMREVIEW_MAX_LOG_BYTES": "4096"},
    ),
    Case(
        "log-gzip-inflates-past-limit",
        "log",
        t("log", gzip_of(HEADER + "c1,a,2020-01-01T00:00:00Z\n" * 20_000), ".csv.gz"),
        "decompresses to more than",
        settings={"ITSMREVIEW_MAX_LOG_BYTES": "65536"},
    ),
]


def snapshot(data_dir: Path) -> tuple:
    with session_scope() as session:
        counts = {
            table.name: session.execute(select(func.count()).select_from(table)).scalar_one()
            for table in metadata.sorted_tables
        }
    files = (
        sorted((str(p.relative_to(data_dir)), p.stat().st_size) for p in data_dir.rglob("*"))
        if data_dir.exists()
        else []
    )
    return counts, files


@pytest.fixture
def corpus_env(configured, tmp_path, monkeypatch):
    def apply(settings: dict | None):
        for key, value in (settings or {}).items():
            monkeypatch.setenv(key, value)
        settings_module.get_settings.cache_clear()

    return apply


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input_fails_cleanly_and_changes_nothing(case, corpus_env, configured, tmp_path):
    files = tmp_path / "input"
    files.mkdir()
    path = case.build(files)
    data_dir = Path(configured.data_dir)
    if case.kind == "harbor-export":
        with session_scope() as session:
            import_path(path, session=session)
    before = snapshot(data_dir)
    corpus_env(case.settings)
    start = time.perf_counter()
    with pytest.raises(ItsmReviewError) as raised, session_scope() as session:
        if case.kind == "tasks":
            import_path(path, session=session)
        elif case.kind == "log":
            options = case.options or {"mapping": MAPPING}
            if "preset" in options:
                options = {"preset": options["preset"], "mapping": MAPPING}
            import_log(path, session=session, name="hostile", **options)
        else:
            export_catalog(tmp_path / "out" / "dest", session=session, fmt="harbor")
    elapsed = time.perf_counter() - start
    message = str(raised.value)
    assert case.message in message, message
    assert "Traceback" not in message and len(message) < 4000
    assert snapshot(data_dir) == before
    assert elapsed < 60, f"took {elapsed:.1f} s"
    if case.kind == "harbor-export":
        written = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
        assert written == []
        assert not Path("/tmp/escaped-itsmreview").exists()
        assert not Path("/tmp/escaped-itsmreview.sh").exists()


def test_corpus_is_large_enough():
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)


# the command line: one line on standard error, exit 1, no traceback


ALPHA_2011 = [
    ["1", "2", "3", "3", "2", "1", "4", "1", "2", "", "", ""],
    ["1", "2", "3", "3", "2", "2", "4", "1", "2", "5", "", "3"],
    ["", "3", "3", "3", "2", "3", "4", "2", "2", "5", "1", ""],
    ["1", "2", "3", "3", "2", "4", "4", "1", "2", "5", "1", ""],
]
CLI_CASES = [
    ("alpha-empty", ["alpha", "{tmp}/a.csv"], "", "no ratings"),
    ("alpha-ragged", ["alpha", "{tmp}/a.csv"], "u1,u2,u3\n1,2,3\n1,2\n", "row 3 has 2 cells"),
    ("alpha-inf", ["alpha", "{tmp}/a.csv"], "u1,u2\n1,inf\n1,2\n", "'inf' is infinite"),
    (
        "alpha-no-header",
        ["alpha", "{tmp}/a.csv"],
        "\n".join(",".join(r) for r in ALPHA_2011) + "\n",
        "add one",
    ),
    (
        "alpha-bootstrap-negative",
        ["alpha", "{tmp}/a.csv", "--bootstrap", "-5"],
        "u1,u2\n1,2\n1,2\n",
        "bootstrap must be 0",
    ),
    ("alpha-folder", ["alpha", "{tmp}"], None, "is a folder"),
    (
        "rubric-missing",
        ["round", "create", "R", "--rubric", "{tmp}/none.yaml"],
        None,
        "no such rubric file",
    ),
    (
        "rubric-bomb",
        ["round", "create", "R", "--rubric", "{tmp}/a.csv"],
        BILLION_LAUGHS_YAML,
        "aliases",
    ),
    (
        "log-encoding",
        [
            "log",
            "import",
            "{tmp}/a.csv",
            "--case",
            "c",
            "--activity",
            "a",
            "--timestamp",
            "t",
            "--encoding",
            "nope",
        ],
        "c,a,t\n",
        "unknown encoding",
    ),
    (
        "log-preset-columns",
        ["log", "import", "{tmp}/a.csv", "--preset", "bpi2013", "--case", "c"],
        "c,a,t\n",
        "fixes the columns",
    ),
    ("agreement-bootstrap", ["agreement", "--bootstrap", "-5"], None, "no review round"),
    ("tasks-folder", ["tasks", "import", "{tmp}"], None, "folder"),
]


@pytest.mark.parametrize("name, args, content, expected", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_cli_reports_hostile_input_in_one_line(configured, tmp_path, name, args, content, expected):
    if content is not None:
        (tmp_path / "a.csv").write_text(content)
    result = CliRunner().invoke(app, [a.format(tmp=tmp_path) for a in args])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert expected in result.output, result.output
    assert "Traceback" not in result.output


def test_alpha_without_header_is_right_with_no_header(configured, tmp_path):
    """Krippendorff (2011), ordinal: 0.815; read without --no-header a rater was dropped."""
    path = tmp_path / "a.csv"
    path.write_text("\n".join(",".join(r) for r in ALPHA_2011) + "\n")
    result = CliRunner().invoke(app, ["alpha", str(path), "--no-header", "--json"])
    assert result.exit_code == 0, result.output
    assert round(json.loads(result.output)["alpha"], 3) == 0.815


# bombs: in a subprocess under a memory limit, they must fail with a message, not be killed

MEMORY_LIMIT = int(1.5 * 2**30)


def run_limited(args: list[str], env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    return subprocess.run(
        [sys.executable, "-m", "itsmreview.cli", *args],
        env=env,
        preexec_fn=limit,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def bomb_env(tmp_path):
    return dict(
        os.environ,
        ITSMREVIEW_DATABASE_URL=f"sqlite:///{tmp_path / 'bomb.db'}",
        ITSMREVIEW_DATA_DIR=str(tmp_path / "data"),
    )


def sparse(path: Path, size: int, head: bytes = b"") -> Path:
    with open(path, "wb") as handle:
        handle.write(head)
        handle.truncate(size)
    return path


BOMBS = [
    (
        "yaml-billion-laughs",
        lambda tmp: write(tmp / "bomb.yaml", BILLION_LAUGHS_YAML),
        ["tasks", "import"],
        "aliases",
    ),
    (
        "sparse-1gib-csv",
        lambda tmp: sparse(tmp / "sparse.csv", 2**30),
        ["log", "import", "--case", "c", "--activity", "a", "--timestamp", "t"],
        "NUL bytes",
    ),
    (
        "sparse-1gib-after-header",
        lambda tmp: sparse(tmp / "tail.csv", 2**30, b"c,a,t\n"),
        ["log", "import", "--case", "c", "--activity", "a", "--timestamp", "t"],
        "row is longer",
    ),
    (
        "gzip-of-1gib-zeros",
        lambda tmp: write(tmp / "z.csv.gz", gzip_stream(b"\x00" * 2**20)),
        ["log", "import", "--case", "c", "--activity", "a", "--timestamp", "t"],
        "row is longer",
    ),
    (
        "gzip-1gib-rows",
        lambda tmp: write(tmp / "rows.csv.gz", gzip_stream(ROWS)),
        ["log", "import", "--case", "c", "--activity", "a", "--timestamp", "t"],
        "decompresses to more than",
    ),
    (
        "json-nested-1m",
        lambda tmp: write(tmp / "deep.json", deep_json(1_000_000)),
        ["tasks", "import"],
        "levels deep",
    ),
]


ROWS = b"c1,a,2020-01-01T00:00:00Z\n" * (2**20 // 26)


def gzip_stream(block: bytes, size: int = 2**30) -> bytes:
    """A gzip file of a CSV header and then `block` repeated to `size` bytes: a few MB that
    inflate to 1 GiB."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [compressor.compress(b"c,a,t\n")]
    out += [compressor.compress(block) for _ in range(size // len(block))]
    out.append(compressor.flush())
    return b"".join(out)


@pytest.mark.parametrize("name, build, command, expected", BOMBS, ids=[b[0] for b in BOMBS])
def test_bombs_fail_with_a_message_under_a_memory_limit(
    tmp_path, bomb_env, name, build, command, expected
):
    path = build(tmp_path)
    env = dict(bomb_env)
    if name == "gzip-1gib-rows":
        env["ITSMREVIEW_MAX_LOG_BYTES"] = str(256 * 2**20)
    args = [*command[:2], str(path), *command[2:]]
    start = time.perf_counter()
    result = run_limited(args, env)
    elapsed = time.perf_counter() - start
    assert result.returncode == 1, (result.returncode, result.stderr[-2000:])
    assert expected in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "MemoryError" not in result.stderr
    assert elapsed < 120
    leftovers = list((tmp_path / "data").rglob(".import-*"))
    assert leftovers == []
