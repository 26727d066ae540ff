"""Issue 35's flows in Chromium, one test each, each checked where it lands (the database copy
the server runs on), not only in the page's text. The demo's content changes: counts of
tasks, rounds and ratings are read from the database, never written here."""

import json
import sqlite3
from contextlib import ExitStack
from pathlib import Path

import pytest
from browser_module import browser_tests as _browser_tests

browser_tests = _browser_tests()
browser = browser_tests.browser  # the same fixtures
served = browser_tests.served
_log_in = browser_tests._log_in
_wait_for_heading = browser_tests._wait_for_heading
_rendered = browser_tests._rendered
_serving = browser_tests._serving
pytestmark = pytest.mark.browser
WAIT = 45  # s: a page's first run on a busy machine


def _rows(database: Path, sql: str, *arguments) -> list[tuple]:
    with sqlite3.connect(database) as connection:
        return connection.execute(sql, arguments).fetchall()


def _one(database: Path, sql: str, *arguments):
    (row,) = _rows(database, sql, *arguments)
    return row[0] if len(row) == 1 else row


def _wait(browser, timeout: float = WAIT):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, timeout)


def _body(browser) -> str:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.TAG_NAME, "body").text


def _until_text(browser, text: str, timeout: float = WAIT) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    _wait(browser, timeout).until(ec.text_to_be_present_in_element((By.TAG_NAME, "body"), text))


def _button(browser, label: str):
    """The enabled button labelled `label`, once it is there."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    return _wait(browser).until(
        ec.element_to_be_clickable((By.XPATH, f"//button[.//p[normalize-space()='{label}']]"))
    )


def _field(browser, label: str):
    """The text input or area whose label is `label`."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    return _wait(browser).until(
        ec.presence_of_element_located(
            (By.CSS_SELECTOR, f"input[aria-label='{label}'], textarea[aria-label='{label}']")
        )
    )


def _retype(element, text: str) -> None:
    from selenium.webdriver.common.keys import Keys

    element.send_keys(Keys.CONTROL, "a")
    element.send_keys(Keys.DELETE)
    element.send_keys(text)


def _options(browser, label: str, which: str = "1") -> list[str]:
    """The options of the select box labelled `label` (the first, or `which`: "last()"), its
    list opened (and left open)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    box = _wait(browser).until(
        ec.element_to_be_clickable(
            (
                By.XPATH,
                f"(//div[@data-testid='stSelectbox'][.//p[normalize-space()='{label}']])[{which}]",
            )
        )
    )
    box.find_element(By.TAG_NAME, "input").click()
    listbox = f"[role=listbox][aria-label='{label}']"
    _wait(browser).until(ec.presence_of_element_located((By.CSS_SELECTOR, listbox)))
    return [o.text for o in browser.find_elements(By.CSS_SELECTOR, f"{listbox} [role=option]")]


def _choose(browser, label: str, option: str, which: str = "1") -> None:
    """Choose the option whose text holds `option` in the select box labelled `label`."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    _options(browser, label, which)
    _wait(browser).until(
        ec.element_to_be_clickable(
            (
                By.XPATH,
                f"//*[@role='listbox'][@aria-label='{label}']//*[@role='option']"
                f"[contains(normalize-space(), '{option}')]",
            )
        )
    ).click()


def _toast(browser, text: str) -> str:
    from selenium.webdriver.common.by import By

    return _wait(browser).until(
        lambda b: next(
            (
                t.text
                for t in b.find_elements(By.CSS_SELECTOR, "[data-testid=stToast]")
                if text in t.text
            ),
            False,
        )
    )


def _native_task(external_id: str, title: str, **fields) -> dict:
    """A task of the native format with no source variant (`fields` add or replace)."""
    return {
        "id": external_id,
        "title": title,
        "persona": "L1 service desk agent",
        "track": "single-agent",
        "instruction": "A user cannot print to the second-floor printer; find out why.",
        "ground_truth": "The print queue is cleared and the user prints again.",
        **fields,
    }


@pytest.fixture
def prepared(demo_configured, demo_database, tmp_path):
    """serve(): the demo copy that this process's services write to (prepare it first), then
    served; returns (address, the copy's path), which is also `serve.database`."""
    database = Path(demo_configured.removeprefix("sqlite:///"))
    with ExitStack() as stack:

        def serve() -> tuple[str, Path]:
            url = stack.enter_context(_serving(database, demo_database[1], tmp_path))
            return url, database

        serve.database = database  # to read before it is served
        yield serve


def _import_in_a_round_of_its_own(tmp_path, task: dict, round_name: str) -> int:
    """`task` imported through the product's importer, in a round of its own that expert1
    has taken; returns expert1's assignment."""
    from demo_rounds import open_round_of_its_own
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.catalog.importing import import_path
    from itsmreview.db import session_scope
    from itsmreview.review.rounds.assignment import claim_next

    bundle = tmp_path / f"{task['id']}.json"
    bundle.write_text(json.dumps({"tasks": [task]}))
    with session_scope() as session:
        import_path(bundle, session=session)
    open_round_of_its_own(round_name, task["id"])
    with session_scope() as session:
        expert = user_by_username(session=session, username="expert1")
        taken = claim_next(session=session, actor=expert, round_name=round_name)
        assert taken is not None
        return taken.id


def _open_task(browser, server: str, round_name: str, external_id: str) -> None:
    """expert1's rating page of `external_id` in `round_name`, its first item focused."""
    from urllib.parse import quote

    _log_in(browser, server, "expert1")
    _wait_for_heading(browser, "My queue")
    browser.get(f"{server}/queue?round={quote(round_name)}&task={quote(external_id)}")
    _wait_for_heading(browser, "My queue")
    _until_text(browser, "Your rating")
    _wait(browser).until(lambda b: b.switch_to.active_element.get_attribute("type") == "radio")


# 1. Imports ---------------------------------------------------------------------------------


def test_a_lead_imports_a_task_file_and_an_expert_is_told_the_role_a_page_needs(
    served, browser, tmp_path
):
    """A lead opens Imports (no "Page not found"), uploads a native task file and confirms:
    the task is in the catalogue. An expert who opens Imports or Users by its address is told
    which role the page needs, and is shown none of it."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    server, database = served
    bundle = tmp_path / "one-task.json"
    bundle.write_text(json.dumps([_native_task("flow-imported", "Clear a stuck print queue")]))
    _log_in(browser, server, "lead")
    _wait_for_heading(browser, "Dashboard")
    browser.get(f"{server}/imports")
    _wait_for_heading(browser, "Imports")
    assert "Page not found" not in _body(browser)
    _wait(browser).until(
        ec.element_to_be_clickable((By.XPATH, "//*[@role='tab'][.//p[text()='Tasks']]"))
    ).click()
    upload = _wait(browser).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, ".st-key-task-upload input[type=file]"))
    )
    upload.send_keys(str(bundle))
    _until_text(browser, "would create 1,")  # the preview, before anything is stored
    assert not _rows(database, "SELECT id FROM tasks WHERE external_id = 'flow-imported'")
    _button(browser, "Confirm import").click()
    _until_text(browser, "Imported 1 new task(s)")
    assert _rows(
        database, "SELECT title, status FROM tasks WHERE external_id = 'flow-imported'"
    ) == [("Clear a stuck print queue", "draft")]

    browser.delete_all_cookies()
    _log_in(browser, server, "expert1")
    _wait_for_heading(browser, "My queue")
    for page, role in (("imports", "lead"), ("users", "admin")):
        browser.get(f"{server}/{page}")
        _until_text(browser, f"This page needs the {role} role.")
        assert "Page not found" not in _body(browser)
        assert not browser.find_elements(By.TAG_NAME, "h1")  # nothing of the page itself
        assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid=stFileUploader]")


# 2. Not applicable --------------------------------------------------------------------------

NO_VARIANT_ROUND = "Tasks without a variant"


def _item_labels(browser) -> list[str]:
    from selenium.webdriver.common.by import By

    return [
        g.get_attribute("aria-label")
        for g in browser.find_elements(By.CSS_SELECTOR, ".st-key-rubric [role=radiogroup]")
    ]


def test_an_expert_marks_an_optional_item_not_applicable_with_a_reason(prepared, browser, tmp_path):
    """A task without a source variant does not ask for the fidelity to one; an optional
    item marked Not applicable asks for a reason, and the submitted rating keeps the item
    empty with the reason in `ratings.not_applicable` (missing in alpha, not a score)."""

    task = _native_task("flow-no-variant", "Clear a stuck print queue (no variant)")
    _import_in_a_round_of_its_own(tmp_path, task, NO_VARIANT_ROUND)
    server, database = prepared()
    _open_task(browser, server, NO_VARIANT_ROUND, task["id"])
    labels = _item_labels(browser)
    assert not [label for label in labels if "Fidelity to the source log variant" in label]
    assert "Does not apply" in _body(browser)  # said where the item would be
    colleague = "Simulated colleague realism (optional)"
    assert colleague in labels
    keys = "".join("1" if label == "Overall verdict" else "4" for label in labels)
    for index, key in enumerate(keys):  # a point of each item in turn, by its key
        _press_for_item(browser, index, key)
    _wait(browser).until(lambda b: "".join(map(str, b.execute_script(CHOSEN))) == keys)
    # then the colleague's last choice, Not applicable: the draft reruns the form to ask why
    not_applicable = _radios(browser, colleague)[-1]
    browser.execute_script("arguments[0].closest('label').click()", not_applicable)
    reason = _field(browser, "Simulated colleague realism: why it does not apply to this task")
    reason.send_keys("no colleague takes part in this task")
    rating = (
        "SELECT r.id, r.status, r.not_applicable FROM ratings r JOIN task_versions v "
        "ON v.id = r.task_version_id JOIN tasks t ON t.id = v.task_id "
        "WHERE t.external_id = ? AND r.is_current"
    )
    _button(browser, "Submit rating").click()
    _until_text(browser, "Rating submitted.")
    rating_id, status, marks = _one(database, rating, task["id"])
    assert status == "submitted"
    assert json.loads(marks) == {
        "simulated_colleague_realism": "no colleague takes part in this task"
    }
    scores = dict(
        _rows(database, "SELECT dimension, value FROM rating_scores WHERE rating_id = ?", rating_id)
    )
    for empty in ("simulated_colleague_realism", "log_fidelity"):
        assert scores.get(empty) is None, scores
    assert scores["scenario_realism"] == 4


CHOSEN = (  # the point chosen in each rubric item, 1-based; 0 where none is
    "return [...document.querySelectorAll('.st-key-rubric [role=radiogroup]')].map(g => "
    "[...g.querySelectorAll('input[type=radio]')].findIndex(r => r.checked) + 1)"
)


# the item's group focused where it is not (a draft's rerun may redraw the form between two
# keys and take the focus with it, which swallowed a key in one run of five)
FOCUS_ITEM = (
    "const g = document.querySelectorAll('.st-key-rubric [role=radiogroup]')[arguments[0]];"
    "if (g && !g.contains(document.activeElement)) {"
    " const r = [...g.querySelectorAll('input[type=radio]')];"
    " (r.find((x) => x.checked) || r[0]).focus({ preventScroll: true }); }"
)


def _press_for_item(browser, index: int, key: str) -> None:
    """Press `key` on item `index`, which the key before moved the focus to, until it is the
    item's point (a key a rerun swallowed is pressed again)."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.action_chains import ActionChains

    for _attempt in range(3):
        browser.execute_script(FOCUS_ITEM, index)
        ActionChains(browser).send_keys(key).perform()
        try:
            _wait(browser, 5).until(lambda b: b.execute_script(CHOSEN)[index] == int(key))
            return
        except TimeoutException:
            continue
    raise AssertionError(f"key {key} did not choose a point of item {index}")


def _radios(browser, label: str) -> list:
    from selenium.webdriver.common.by import By

    return browser.find_elements(
        By.CSS_SELECTOR, f".st-key-rubric [role=radiogroup][aria-label='{label}'] input"
    )


# 3. The rating page -------------------------------------------------------------------------

LONG_ROUND = "A long policy"
POLICY = "\n".join(
    [
        "## Printing policy",
        "**Always** read the queue before escalating.",
        "",
        "| Step | Action |",
        "| :--- | :--- |",
        "| 1 | Read the queue |",
        "| 2 | Clear the stuck job |",
        "",
        "<b>kept as written</b> ![floor plan](http://evil.example/plan.png)",
        "",
        *["The agent reads the whole ticket history before acting on any of it."] * 25,
    ]
)


def test_the_rating_page_folds_long_text_renders_it_safely_and_diffs_the_end_state(
    prepared, browser, tmp_path
):
    """A long instruction starts closed, its length in its title; opened, its Markdown is
    drawn (bold, a table) with no HTML, image or link; Show raw text shows it as written; a
    changed record of the expected end state shows its Before value beside its After."""
    from selenium.webdriver.common.by import By

    state = {
        "changes": [
            {
                "entity": "incident",
                "key": "INC0042",
                "change": "changed",
                "before": {"state": "In Progress"},
                "after": {"state": "Resolved"},
            }
        ]
    }
    task = _native_task("flow-long-policy", "Clear a stuck queue by the policy")
    task |= {"instruction": POLICY, "state": state}
    _import_in_a_round_of_its_own(tmp_path, task, LONG_ROUND)
    server, _ = prepared()
    _open_task(browser, server, LONG_ROUND, task["id"])
    section = browser.find_element(By.XPATH, "//details[.//summary[contains(., 'Instruction (')]]")
    words, lines = len(POLICY.split()), len(POLICY.splitlines())
    summary = section.find_element(By.TAG_NAME, "summary")
    assert summary.text.split("\n")[-1] == f"Instruction ({words:,} words, {lines:,} lines)"
    assert words > 250 and section.get_attribute("open") is None  # long: closed
    summary.click()
    _wait(browser).until(lambda _: "Printing policy" in section.text)  # opened
    assert [s.text for s in section.find_elements(By.TAG_NAME, "strong")] == ["Always"]
    assert section.find_elements(By.XPATH, ".//table[.//th[normalize-space()='Step']]")
    assert not section.find_elements(By.CSS_SELECTOR, "b, img, a:not([href^='#'])")
    shown = section.text.replace("\u2060", "")
    assert "<b>kept as written</b>" in shown and "[image: floor plan]" in shown
    assert "**Always**" not in shown

    browser.find_element(By.XPATH, "//label[.//p[text()='Show raw text']]").click()

    def raw(_):
        section = browser.find_element(
            By.XPATH, "//details[.//summary[contains(., 'Instruction (')]]"
        )
        if section.get_attribute("open") is None:
            section.find_element(By.TAG_NAME, "summary").click()
        return "| :--- | :--- |" in section.text and "**Always**" in section.text

    _wait(browser).until(raw)

    diff = browser.find_element(By.XPATH, "//table[.//th[normalize-space()='Before']]")
    header = [th.get_attribute("textContent") for th in diff.find_elements(By.TAG_NAME, "th")]
    rows = [
        dict(
            zip(
                header,
                [td.get_attribute("textContent") for td in tr.find_elements(By.TAG_NAME, "td")],
                strict=True,
            )
        )
        for tr in diff.find_elements(By.CSS_SELECTOR, "tbody tr")
    ]
    assert [(r["Field"], r["Before"], r["After"]) for r in rows] == [
        ("state", "In Progress", "Resolved")
    ]
    assert "changed" in rows[0]["Change"] and "INC0042" in rows[0]["Record"]


# 4. Adjudication ----------------------------------------------------------------------------


def _on_round(browser, name: str) -> None:
    """The Dashboard on round `name` (its Round box is there when there are several)."""
    from selenium.webdriver.common.by import By

    _rendered(browser)
    boxes = browser.find_elements(By.CSS_SELECTOR, "input[aria-label='Round']")
    if boxes and boxes[0].get_attribute("value") != name:
        _choose(browser, "Round", name)
        _wait(browser).until(lambda b: _field(b, "Round").get_attribute("value") == name)
    _until_text(browser, f"Agreement in {name}")


def _decision(browser, choice: str) -> None:
    from selenium.webdriver.common.by import By

    browser.find_element(
        By.XPATH,
        f"//*[@role='radiogroup'][@aria-label='Decision']//label[normalize-space()='{choice}']",
    ).click()


def _decisions_chosen(browser) -> list[bool]:
    from selenium.webdriver.common.by import By

    return [
        r.is_selected()
        for r in browser.find_elements(
            By.CSS_SELECTOR, "[role=radiogroup][aria-label='Decision'] input[type=radio]"
        )
    ]


def _queue_table(browser) -> str:
    from selenium.webdriver.common.by import By

    tables = browser.find_elements(
        By.XPATH, "//table[.//th[normalize-space()='Why a lead decides']]"
    )
    return tables[0].text if tables else ""


def test_a_lead_finds_a_disputed_task_reads_its_ratings_and_decides(served, browser):
    """The adjudication queue: a search by task id finds the task; choosing it shows its
    current ratings inline; Record decision files one ledger-backed decision with its reason
    and changes the task's status; the form starts blank for the next task, where a click
    without a decision records nothing."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    server, database = served
    waiting: dict[str, list[tuple[int, str]]] = {}
    for round_name, version, external_id in _rows(
        database,
        "SELECT r.name, q.task_version_id, q.external_id FROM adjudication_queue q "
        "JOIN review_rounds r ON r.id = q.round_id ORDER BY r.id, q.external_id",
    ):
        waiting.setdefault(round_name, []).append((version, external_id))
    round_name, queued = next((r, q) for r, q in waiting.items() if len(q) >= 2)
    (other_version, other), (version, chosen) = queued[:2]
    round_id = _one(database, "SELECT id FROM review_rounds WHERE name = ?", round_name)
    raters = _rows(
        database,
        "SELECT u.username FROM ratings r JOIN users u ON u.id = r.expert_id "
        "WHERE r.round_id = ? AND r.task_version_id = ? AND r.is_current AND "
        "r.status = 'submitted' AND r.rater_kind = 'human'",
        round_id,
        version,
    )
    decided = (
        "SELECT decision, reason FROM adjudications WHERE round_id = ? AND task_version_id = ?"
    )
    _log_in(browser, server, "lead")
    _wait_for_heading(browser, "Dashboard")
    _on_round(browser, round_name)
    _until_text(browser, "Disagreements to adjudicate")
    _wait(browser).until(lambda b: other in _queue_table(b) and chosen in _queue_table(b))
    _field(browser, "Find a task (id, title or reason)").send_keys(chosen, Keys.ENTER)
    _wait(browser).until(lambda b: other not in _queue_table(b) and chosen in _queue_table(b))
    _choose(browser, "Task", chosen)
    _until_text(browser, f"The task's {len(raters)} current rating(s):")
    experts = browser.find_elements(
        By.XPATH, "//table[.//th[normalize-space()='Expert']]//tbody/tr/td[1]"
    )
    assert raters and sorted(e.text for e in experts) == sorted(name for (name,) in raters)
    ledger = "SELECT count(*) FROM ledger_entries WHERE artifact_type = 'adjudication'"
    entries = _one(database, ledger)
    _decision(browser, "reject")
    _field(browser, "Reason (kept in the ledger)").send_keys("The ground truth cannot be reached.")
    _button(browser, "Record decision").click()
    _toast(browser, "Recorded: task is now rejected.")
    assert _rows(database, decided, round_id, version) == [
        ("reject", "The ground truth cannot be reached.")
    ]
    assert _one(database, ledger) == entries + 1
    assert _one(database, "SELECT status FROM tasks WHERE external_id = ?", chosen) == "rejected"

    # the next task: a blank form (the decided task no longer shown as chosen), which records
    # nothing until it is filled
    _rendered(browser)
    assert _field(browser, "Task").get_attribute("value") == ""
    assert _field(browser, "Reason (kept in the ledger)").get_attribute("value") == ""
    _retype(_field(browser, "Find a task (id, title or reason)"), other)
    _field(browser, "Find a task (id, title or reason)").send_keys(Keys.ENTER)
    _wait(browser).until(lambda b: other in _queue_table(b))
    _choose(browser, "Task", other)
    _until_text(browser, "current rating(s):")
    assert _field(browser, "Reason (kept in the ledger)").get_attribute("value") == ""
    assert not any(_decisions_chosen(browser))
    _button(browser, "Record decision").click()
    _until_text(browser, "Choose the task and your decision; nothing was recorded.")
    assert _rows(database, decided, round_id, other_version) == []
    assert _one(database, ledger) == entries + 1


# 5. Users -----------------------------------------------------------------------------------


def _table_cells(browser) -> list[str]:
    """The cells of the page's data grids, as their accessible tables give them."""
    from selenium.webdriver.common.by import By

    return [
        cell.get_attribute("textContent")
        for cell in browser.find_elements(By.CSS_SELECTOR, "[data-testid=stDataFrame] td")
    ]


def test_an_admin_adds_deactivates_and_edits_a_user(served, browser):
    """A user just added is in the table and the lists at once; Deactivate says what it did
    and the account is inactive; display name and expertise are edited; no list offers the
    `model` role (model raters come from model reviews)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    server, database = served
    _log_in(browser, server, "admin")
    _wait_for_heading(browser, "Users")
    assert _options(browser, "Role") == ["expert", "lead", "admin"]  # the new user's roles
    _choose(browser, "Role", "lead")
    _field(browser, "Username").send_keys("flowlead")
    _field(browser, "Display name").send_keys("Flo Lead")
    _field(browser, "Expertise (personas, comma-separated)").send_keys("Incident manager")
    _button(browser, "Add user").click()
    _until_text(browser, "Added flowlead. Password (shown once)")
    # no reload: the table names the new user once the page has run again
    _wait(browser).until(lambda b: "flowlead" in _table_cells(b))
    assert _rows(
        database, "SELECT role, display_name, active FROM users WHERE username = 'flowlead'"
    ) == [("lead", "Flo Lead", 1)]
    _choose(browser, "User", "flowlead")  # the list names the new user too
    _button(browser, "Deactivate").click()
    _toast(browser, "flowlead deactivated; their sessions ended.")
    _button(browser, "Reactivate")  # the page shows the account as it now is
    assert _one(database, "SELECT active FROM users WHERE username = 'flowlead'") == 0
    assert _options(browser, "Role", "last()") == ["expert", "lead", "admin"]  # a change of role
    browser.switch_to.active_element.send_keys(Keys.ESCAPE)
    name = browser.find_element(By.CSS_SELECTOR, ".st-key-profile-name-flowlead input")
    assert name.get_attribute("value") == "Flo Lead"
    _retype(name, "Flora Lead")
    expertise = browser.find_element(By.CSS_SELECTOR, ".st-key-profile-expertise-flowlead input")
    assert expertise.get_attribute("value") == "Incident manager"
    _retype(expertise, "Incident manager, L2 resolver")
    _button(browser, "Save profile").click()
    _toast(browser, "Profile of flowlead saved.")
    name, expertise = _one(
        database, "SELECT display_name, expertise FROM users WHERE username = 'flowlead'"
    )
    assert (name, json.loads(expertise)) == ("Flora Lead", ["Incident manager", "L2 resolver"])
    _wait(browser).until(lambda b: "Flora Lead" in _table_cells(b))


# 6. Ledger: Record a source -----------------------------------------------------------------


def _head(browser) -> str:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.CSS_SELECTOR, "[data-testid=stCode]").text.strip()


def test_a_lead_records_a_source_keeping_the_fields_through_a_refusal(served, browser):
    """Record a source: the task is found by a search and picked from the list; a refused
    field keeps every other field as typed; once recorded, the head shown is the new entry's
    and the entry is in the chain."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    server, database = served
    external_id, title = _rows(database, "SELECT external_id, title FROM tasks ORDER BY id")[0]
    before = _one(database, "SELECT max(seq) FROM ledger_entries")
    _log_in(browser, server, "lead")
    _wait_for_heading(browser, "Dashboard")
    browser.get(f"{server}/ledger")
    _wait_for_heading(browser, "Provenance ledger")
    _wait(browser).until(lambda b: _head(b).startswith(f"{before}:"))
    head = _head(browser)
    browser.find_element(By.XPATH, "//summary[.//p[text()='Record a source']]").click()
    _field(browser, "Find a task (id or title)").send_keys(title[:25], Keys.ENTER)
    _wait(browser).until(lambda b: any(external_id in o for o in _options(b, "Task")))
    _choose(browser, "Task", external_id)
    typed = {
        "Reference": "ServiceNow CMDB data model",
        "URL": "https://docs.example.org/cmdb",
        "DOI": "10.1000/182",
        "Version": "Xanadu",
        "Note": "read from the vendor's schema",
    }
    _field(browser, "Field").send_keys("org structure!")  # '!' is not allowed in a field name
    for label, text in typed.items():
        _field(browser, label).send_keys(text)
    _button(browser, "Record").click()
    _until_text(browser, "name the field in 1-128 letters")
    refusal = browser.find_element(By.CSS_SELECTOR, "[data-testid='stAlertContentError']").text
    assert "--" not in refusal, "the page's refusal names no command-line option"
    assert _one(database, "SELECT max(seq) FROM ledger_entries") == before
    assert _field(browser, "Field").get_attribute("value") == "org structure!"
    assert {label: _field(browser, label).get_attribute("value") for label in typed} == typed
    assert external_id in _field(browser, "Task").get_attribute("value")  # still chosen
    _retype(_field(browser, "Field"), "org_structure")
    _button(browser, "Record").click()
    _toast(browser, f"Recorded as ledger entry {before + 1}.")
    _wait(browser).until(lambda b: _head(b).startswith(f"{before + 1}:"))
    assert _head(browser) != head
    artifact, field, kind, reference, payload = _one(
        database,
        "SELECT artifact_id, field, source_kind, reference, payload FROM ledger_entries "
        "WHERE seq = ? AND artifact_type = 'task' AND action = 'add-source'",
        before + 1,
    )
    assert (artifact, field, kind, reference) == (
        external_id,
        "org_structure",
        "external",
        typed["Reference"],
    )
    assert json.loads(payload)["note"] == typed["Note"]
    assert _field(browser, "Field").get_attribute("value") == ""  # a new, empty form


# 7. Links -----------------------------------------------------------------------------------


def _main_link(browser, text: str):
    """The link in the page (not the sidebar) whose text ends with `text`."""
    from selenium.webdriver.common.by import By

    return _wait(browser).until(
        lambda b: next(
            (
                a
                for a in b.find_elements(By.CSS_SELECTOR, "[data-testid=stMain] a[href]")
                if a.text.split("\n")[-1].strip().endswith(text)
            ),
            False,
        )
    )


def _listed_tasks(browser, total: int) -> int:
    """How many tasks the Tasks page says match, of `total`."""
    import re

    found = {}

    def counted(b):
        match = re.search(rf"([\d,]+) of {total:,} tasks", _body(b))
        found["n"] = match and int(match.group(1).replace(",", ""))
        return match

    _wait(browser).until(counted)
    return found["n"]


def test_tiles_variants_and_personas_open_their_pages(served, browser):
    """Home's tiles are links that open their page; the Variant explorer opens the tasks that
    cover the variant shown (/tasks?variant=...), Persona completeness a persona's tasks
    (/tasks?persona=...): the Tasks page lists just those, as the database has them."""
    from selenium.webdriver.common.by import By

    server, database = served
    total = _one(database, "SELECT count(*) FROM tasks")
    _log_in(browser, server, "lead")
    _wait_for_heading(browser, "Dashboard")
    browser.get(f"{server}/home")
    _wait_for_heading(browser, "itsmreview")
    tile = _main_link(browser, "Tasks")
    assert tile.get_attribute("href").endswith("/tasks")
    tile.click()
    _wait_for_heading(browser, "Tasks")
    assert _listed_tasks(browser, total) == total  # no filter: every task

    browser.get(f"{server}/variants")
    _wait_for_heading(browser, "Variant explorer")
    link = _main_link(browser, "task(s) that cover this variant")
    key = link.get_attribute("href").split("/tasks?variant=", 1)[1]
    covering = _rows(
        database,
        "SELECT DISTINCT t.external_id FROM tasks t JOIN task_versions v ON v.task_id = t.id "
        "JOIN task_version_variants s ON s.task_version_id = v.id WHERE s.sequence_key = ? "
        "AND v.version = (SELECT max(version) FROM task_versions WHERE task_id = t.id)",
        key,
    )
    assert covering and f"Open the {len(covering)} task(s)" in link.text
    link.click()
    _wait_for_heading(browser, "Tasks")
    assert _listed_tasks(browser, total) == len(covering)
    _wait(browser).until(lambda b: {c for (c,) in covering} <= set(_table_cells(b)))
    assert _field(browser, "Source variant").get_attribute("value") != "any"

    persona, tasks = _rows(
        database, "SELECT persona, count(*) FROM tasks GROUP BY persona ORDER BY 2 DESC, 1"
    )[0]
    browser.get(f"{server}/completeness")
    _wait_for_heading(browser, "Persona completeness")
    _wait(browser).until(
        lambda b: b.find_element(
            By.XPATH, f"//summary[.//p[starts-with(normalize-space(), '{persona}:')]]"
        )
    ).click()
    link = _main_link(browser, f"Open the tasks of {persona}")
    assert "/tasks?persona=" in link.get_attribute("href")
    link.click()
    _wait_for_heading(browser, "Tasks")
    assert _listed_tasks(browser, total) == tasks
    chosen = browser.find_elements(By.CSS_SELECTOR, ".st-key-tasks-personas [data-tag]")
    assert [c.text for c in chosen] == [persona]


# 8. Accepting a proposed resolution ---------------------------------------------------------

PROPOSAL_ROUND = "A proposed resolution"
PROPOSED = "Closing INC0042 as a duplicate of INC0041 is also correct."


def test_accepting_a_proposal_says_what_it_makes_and_waits_for_a_confirmation(
    prepared, browser, tmp_path
):
    """A lead's Accept on an expert's proposed resolution of a task under review first says
    what it makes (version 2, in review in the task's round) and changes nothing; the
    confirmation makes version 2 with the proposal among its acceptable end states."""
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.db import session_scope
    from itsmreview.review.repair.service import propose_resolution

    task = _native_task("flow-proposal", "Close a duplicate incident")
    assignment = _import_in_a_round_of_its_own(tmp_path, task, PROPOSAL_ROUND)
    with session_scope() as session:
        expert = user_by_username(session=session, username="expert1")
        propose_resolution(
            session=session, actor=expert, assignment_id=assignment, description=PROPOSED
        )
    server, database = prepared()
    versions = (
        "SELECT v.version, v.extra FROM task_versions v JOIN tasks t ON t.id = v.task_id "
        "WHERE t.external_id = 'flow-proposal' ORDER BY v.version"
    )
    proposal = "SELECT status FROM resolution_proposals WHERE description = ?"
    _log_in(browser, server, "lead")
    _wait_for_heading(browser, "Dashboard")
    _on_round(browser, PROPOSAL_ROUND)
    _summary(browser, "Proposed resolutions to decide (1)").click()
    _until_text(browser, PROPOSED)
    _button(browser, "Accept…").click()
    _until_text(browser, "Accepting makes version 2 of flow-proposal")
    said = _body(browser)
    assert f"takes the place of version 1 in review in {PROPOSAL_ROUND}" in said
    assert [v for v, _ in _rows(database, versions)] == [1]  # told, not done
    assert _one(database, proposal, PROPOSED) == "proposed"
    _button(browser, "Accept: make version 2").click()
    _toast(browser, f"Accepted: flow-proposal v2, in review in {PROPOSAL_ROUND}.")
    made = _rows(database, versions)
    assert [v for v, _ in made] == [1, 2]
    alternatives = json.loads(made[1][1]).get("alternatives") or []
    assert [a["description"] for a in alternatives] == [PROPOSED]
    assert _one(database, proposal, PROPOSED) == "accepted"


def _summary(browser, title: str):
    """The clickable title of the expander `title`."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    return _wait(browser).until(
        ec.element_to_be_clickable((By.XPATH, f"//summary[.//p[normalize-space()='{title}']]"))
    )


# 9. Charts on small data --------------------------------------------------------------------

EMPTY_ROUND = "Nobody has rated yet"
ALPHA_CHART = """
const plot = document.querySelector('.st-key-alpha-chart .js-plotly-plot');
const points = plot && plot._fullData && plot._fullData[0];  // arrays decoded, as drawn
if (!points) return null;
return {
  alpha: Array.from(points.x),
  low: Array.from(points.customdata, c => c[0]),
  high: Array.from(points.customdata, c => c[1]),
  plus: Array.from(points.error_x.array),
  minus: Array.from(points.error_x.arrayminus),
  hover: points.hovertemplate,
  bars: plot.querySelectorAll('g.errorbar').length,
};
"""


def test_an_empty_round_says_so_and_every_alpha_carries_its_interval(prepared, browser):
    """The Dashboard of a round nobody has rated says so in a sentence, with no empty plot;
    the alpha of a rated round is drawn with its 95% interval (error bars, the interval in
    the hover text)."""
    from demo_rounds import open_round_of_its_own
    from selenium.webdriver.common.by import By

    first = _one(prepared.database, "SELECT external_id FROM tasks ORDER BY id LIMIT 1")
    open_round_of_its_own(EMPTY_ROUND, first)
    rated = _rows(
        prepared.database,
        "SELECT r.name FROM ratings x JOIN review_rounds r ON r.id = x.round_id "
        "WHERE x.status = 'submitted' AND x.is_current AND x.rater_kind = 'human' "
        "GROUP BY r.id ORDER BY count(*) DESC LIMIT 1",
    )[0][0]
    server, database = prepared()
    assert not _rows(
        database,
        "SELECT x.id FROM ratings x JOIN review_rounds r ON r.id = x.round_id WHERE r.name = ?",
        EMPTY_ROUND,
    )
    _log_in(browser, server, "lead")
    _wait_for_heading(browser, "Dashboard")
    _on_round(browser, EMPTY_ROUND)
    _until_text(browser, "No rubric item has an alpha yet")
    _rendered(browser)
    assert not browser.find_elements(By.CSS_SELECTOR, ".st-key-alpha-chart")  # no empty plot

    _on_round(browser, rated)
    shown = _wait(browser).until(lambda b: b.execute_script(ALPHA_CHART))
    points = len(shown["alpha"])
    assert points and shown["bars"] == points  # an error bar on each alpha
    assert "(%{customdata[0]:.3f} to %{customdata[1]:.3f})" in shown["hover"]
    for alpha, low, high, plus, minus in zip(
        *(shown[k] for k in ("alpha", "low", "high", "plus", "minus")), strict=True
    ):
        if low is not None and high is not None:  # an interval the bootstrap could draw
            assert low <= alpha <= high
            assert abs(plus - (high - alpha)) < 1e-9 and abs(minus - (alpha - low)) < 1e-9
    assert any(
        low is not None and high > low
        for low, high in zip(shown["low"], shown["high"], strict=True)
    )
