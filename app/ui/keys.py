"""Keyboard shortcuts and a quiet draft for the rubric form, in the browser.

The rubric is an `st.form`, so choosing a scale point reruns nothing. This script, mounted once
on the page, adds what the form cannot: number keys choose a point of the focused item and move
to the next one, Tab skips the items' help buttons, Enter submits, and a moment after the last
change the form's "Keep draft" button is pressed so that the draft reaches the database (a
rerun of the rubric alone).
It reads no task text and writes no HTML.
"""

import functools

import streamlit as st

SHORTCUTS = (
    "Keys: **1-9** choose a point of the focused item and go to the next · "
    "**Tab** / **Shift+Tab** next / previous item · **Enter** submit the rating"
)

_JS = r"""
export default function ({ data }) {
  const root = () => document.querySelector("." + data.container);
  const button = (label) =>
    root() && [...root().querySelectorAll("button")].find((b) => b.textContent.trim() === label);
  const groups = () => (root() ? [...root().querySelectorAll("[role=radiogroup]")] : []);
  const focusGroup = (group, preventScroll = false) => {
    const radios = [...group.querySelectorAll("input[type=radio]")];
    (radios.find((r) => r.checked) || radios[0])?.focus({ preventScroll });
  };
  let timer = null;
  const quiet = () => {
    clearTimeout(timer);
    timer = null;
  };
  const soon = () => {
    quiet();
    timer = setTimeout(() => {
      timer = null;
      button(data.draft)?.click();
    }, data.debounce_ms);
  };
  const inside = (node) => root() && node instanceof Node && root().contains(node);
  const onKey = (event) => {
    const target = event.target;
    if (!inside(target) || event.altKey || event.metaKey) return;
    const typing =
      target.tagName === "TEXTAREA" || (target.tagName === "INPUT" && target.type !== "radio");
    if (event.key === "Enter" && (!typing || event.ctrlKey)) {
      if (target.tagName === "BUTTON") return;  // the button's own Enter
      event.preventDefault();
      quiet();
      button(data.submit)?.click();
      return;
    }
    if (typing || event.ctrlKey || !/^[1-9]$/.test(event.key)) return;
    const group = target.closest("[role=radiogroup]");
    if (!group) return;
    const radios = [...group.querySelectorAll("input[type=radio]")];
    const labelled = radios.find((r) => r.closest("label")?.textContent.trim() === event.key);
    const chosen = labelled || radios[Number(event.key) - 1];
    if (!chosen) return;
    event.preventDefault();
    chosen.click();
    const all = groups();
    const next = all[all.indexOf(group) + 1];
    if (next) focusGroup(next);
    else button(data.submit)?.focus();
  };
  const onChange = (event) => {
    if (inside(event.target) && event.target.tagName !== "BUTTON") soon();
  };
  const onClick = (event) => {
    if (!inside(event.target)) return;
    if (event.target.closest("button")) {
      if (event.target.closest("button").textContent.trim() === data.submit) quiet();
      return;
    }
    soon();
  };
  // an item's help ("?") is for the mouse: Tab goes from one item to the next, never to the
  // next item's help, whose tooltip would cover the page and swallow the digits typed next
  const skipHelp = () => {
    if (!root()) return;
    for (const help of root().querySelectorAll(
      "[data-testid=stTooltipIcon] button, [data-testid=stTooltipIcon] [tabindex]"
    ))
      if (help.getAttribute("tabindex") !== "-1") help.setAttribute("tabindex", "-1");
  };
  const drawn = new MutationObserver(skipHelp);  // the form's elements are redrawn by each run
  drawn.observe(document.body, { childList: true, subtree: true });
  skipHelp();
  // a new task opens at its top, its first item focused for the keys; the page may still be
  // drawing (its elements replaced once the run ends), so look again until the focus holds
  const top = () => {
    const panes = document.querySelectorAll(
      "[data-testid=stMain], [data-testid=stAppViewContainer], section.main"
    );
    for (const pane of [document.scrollingElement, ...panes]) if (pane) pane.scrollTop = 0;
  };
  top();
  let held = 0;
  let ticks = 0;
  let settle = null;
  const app = document.querySelector("[data-testid=stApp]");
  const watch = new MutationObserver(() => tick());  // at once when the run ends
  const tick = () => {
    ticks += 1;
    const idle = !app || app.getAttribute("data-test-script-state") !== "running";
    const free = !document.activeElement || document.activeElement === document.body;
    if (idle && free && groups()[0]) {
      top();
      focusGroup(groups()[0], true);
    }
    held = idle && inside(document.activeElement) ? held + 1 : 0;
    if (held >= 3 || ticks > 80 || (!free && !inside(document.activeElement))) {
      clearInterval(settle);
      watch.disconnect();
    }
  };
  settle = setInterval(tick, 50);
  if (app) watch.observe(app, { attributes: true, attributeFilter: ["data-test-script-state"] });
  tick();
  document.addEventListener("keydown", onKey, true);
  document.addEventListener("change", onChange, true);
  document.addEventListener("input", onChange, true);
  document.addEventListener("click", onClick, true);
  return () => {
    clearInterval(settle);
    watch.disconnect();
    drawn.disconnect();
    quiet();
    document.removeEventListener("keydown", onKey, true);
    document.removeEventListener("change", onChange, true);
    document.removeEventListener("input", onChange, true);
    document.removeEventListener("click", onClick, true);
  };
}
"""


@functools.cache
def _component():
    return st.components.v2.component("itsmreview.rubric_keys", js=_JS)


def rubric_keys(
    container_key: str, *, submit: str, draft: str, debounce_ms: int = 1500, key: str
) -> None:
    """Mount the shortcuts for the form inside `st.container(key=container_key)`, whose
    buttons are labelled `submit` and `draft`. A new `key` (one per task) scrolls the page to
    its top and focuses the first item."""
    _component()(
        key=key,
        data={
            "container": f"st-key-{container_key}",
            "submit": submit,
            "draft": draft,
            "debounce_ms": debounce_ms,
        },
    )
