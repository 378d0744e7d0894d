// The belay console: a client of belay's /v1 API, as any other client is. The account token is
// kept in this browser session only (sessionStorage) and sent as a bearer token; every page is
// rendered here from the API's answers, and every error is shown as the API states it.
"use strict";

const TOKEN_KEY = "belay.token";
const RATINGS = ["broken", "scuffed", "passable", "great", "flawless"];
const CATEGORIES = [
  ["poop", "💩"], ["brick", "🧱"], ["silver", "🥈"], ["gold", "🥇"], ["diamond", "💎"],
];

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

async function api(method, path, body) {
  const headers = { Authorization: "Bearer " + token() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await resp.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch (_) { data = text; }
  }
  if (!resp.ok) {
    const err = data && data.error ? data.error : { code: "http_" + resp.status, message: String(text) };
    throw new ApiError(resp.status, err.code, err.message);
  }
  return data;
}

// h("tag", {attr: value, onclick: fn}, child, …): text children are text nodes, never markup.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function link(href, ...children) {
  return h("a", { href, "data-nav": true }, ...children);
}

// ---- Temporal's Web UI --------------------------------------------------------------------

// Temporal's Web UI pages of belay's namespace, as the API's configuration names it (the shell's
// belay-temporal-ui meta tag); null when none is configured.
function temporalUi() {
  const meta = document.querySelector('meta[name="belay-temporal-ui"]');
  return meta && meta.content ? meta.content : null;
}

// A line linking to the workflows behind this page in Temporal's Web UI: each [label, query]
// opens the Web UI's list filtered by a visibility query (belay's search attributes). Nothing
// when no Web UI is configured.
function workflowsLine(...links) {
  const ui = temporalUi();
  if (!ui) return null;
  const anchors = links.map(([label, query]) => h("a", {
    href: `${ui}/workflows?query=${encodeURIComponent(query)}`,
    target: "_blank",
    rel: "noopener noreferrer",
    class: "temporal-link",
    title: query,
  }, label));
  return h("p", { class: "workflows muted", id: "workflows" }, "In Temporal: ",
    anchors.flatMap((a, i) => (i ? [" · ", a] : [a])));
}

function showError(err) {
  const box = document.getElementById("error");
  if (!err) {
    box.hidden = true;
    box.textContent = "";
    return;
  }
  box.hidden = false;
  box.textContent = err instanceof ApiError
    ? `${err.status} ${err.code}: ${err.message}`
    : String(err && err.message ? err.message : err);
}

// Runs an action, showing what the API answered if it failed; the page stays as it was.
async function act(fn) {
  showError(null);
  try {
    return await fn();
  } catch (err) {
    showError(err);
    if (err instanceof ApiError && err.status === 401) signOut(err);
    return undefined;
  }
}

// As h()'s children: arrays are spread, and null, undefined and false leave nothing.
function setMain(...children) {
  const main = document.getElementById("main");
  main.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

function navigate(path) {
  history.pushState(null, "", path);
  render();
}

// Why the API refused the token, as the sign-in page says it: each 401 code of its own.
const SIGNED_OUT_KEY = "belay.signedOut";
const SIGNED_OUT = {
  token_expired: "Your token has expired. Sign in with another (belay account token create makes one).",
  token_revoked: "Your token was revoked. Sign in with another (belay account token create makes one).",
  account_disabled: "Your account is disabled. An operator can enable it again.",
  unauthorized: "The API does not know that token.",
  signed_out: "You signed out. Sign in again with your token.",
};

function signOut(err) {
  sessionStorage.removeItem(TOKEN_KEY);
  signedIn = null;
  showWho(null);
  if (err) sessionStorage.setItem(SIGNED_OUT_KEY, JSON.stringify({ code: err.code, message: err.message }));
  if (location.pathname !== "/sign-in") navigate("/sign-in");
  else showSignedOut();
}

// ---- who is signed in --------------------------------------------------------------------

const ROLE_WORDS = { operator: "operator", member: "member" };
// The account the session's token belongs to: { token, account } once the API answered.
let signedIn = null;

// The header's account line: name, role and Sign out; empty when nobody is signed in.
function showWho(account) {
  const who = document.getElementById("who");
  document.getElementById("nav").hidden = !account;
  if (!account) {
    who.replaceChildren();
    return;
  }
  who.replaceChildren(
    h("span", { id: "who-name", title: account.id }, account.name || account.id), " ",
    h("span", { id: "who-role", class: "tag role", dataset: { role: account.role } }, ROLE_WORDS[account.role] || account.role), " ",
    h("button", {
      type: "button",
      id: "sign-out",
      onclick: () => signOut({ code: "signed_out", message: "signed out" }),
    }, "Sign out"));
}

// Asks the API who the token belongs to once per token (a refused token signs out with the
// API's reason), without holding up the page.
function whoAmI() {
  const t = token();
  if (!t) return showWho(null);
  if (signedIn && signedIn.token === t) return showWho(signedIn.account);
  act(async () => {
    const account = await api("GET", "/v1/account");
    if (token() !== t) return;
    signedIn = { token: t, account };
    showWho(account);
  });
}

// The reason the last token was refused, on the sign-in page, until a sign-in succeeds.
function showSignedOut() {
  const box = document.getElementById("signed-out");
  if (!box) return;
  const why = JSON.parse(sessionStorage.getItem(SIGNED_OUT_KEY) || "null");
  box.hidden = !why;
  box.dataset.code = why ? why.code : "";
  box.textContent = why ? (SIGNED_OUT[why.code] || why.message) + ` (${why.code})` : "";
}

// ---- labels ------------------------------------------------------------------------------

function pinLabel(c) {
  return `${c.slug}@${c.version}/${c.variant}` + (c.engine ? ` (${c.engine})` : "");
}

function comboLabel(c) {
  if (!c) return "";
  if (c.kind === "harness") return `${c.harness} · ${c.model}`;
  if (c.kind === "gg") {
    const models = c.models ? Object.entries(c.models).map(([k, v]) => `${k}=${v}`).join(", ") : "";
    return `gg ${c.configId || c.config || ""}` + (models ? ` · ${models}` : "");
  }
  return JSON.stringify(c);
}

function targetLabel(t) {
  if (t === null || t === undefined) return "inherit the account's";
  if (t.kind === "unbounded") return "unbounded";
  return `bounded: ${t.runs} runs`;
}

// A plan's or a ladder's ledger (decision 0054): what it spent and reserved, against its budget.
function spendLabel(x) {
  const usd = (n) => `$${Number(n || 0).toFixed(2)}`;
  const of = x.budgetUsd === null || x.budgetUsd === undefined ? "no budget" : `budget ${usd(x.budgetUsd)}`;
  return `spent ${usd(x.spentUsd)}, reserved ${usd(x.reservedUsd)}; ${of}`;
}

function reasonLabel(r) {
  if (!r) return "";
  if (typeof r === "string") return r;
  return r.message || r.reason || r.code || JSON.stringify(r);
}

// ---- live pages --------------------------------------------------------------------------

// A page showing work in flight reads itself again every LIVE_EVERY ms (bounded polling: one
// page, one read at a time) while anything is in flight, and says when it was last updated; it
// stops when nothing is in flight, when the page is left, and while the tab is hidden. Every
// control that starts work kicks it again.
const LIVE_EVERY = 5000;
let live = null;

function stopLive() {
  if (live) {
    live.stopped = true;
    clearTimeout(live.timer);
  }
  live = null;
}

// `line` shows the last update; `refresh()` reads and draws the page and answers whether
// anything is still in flight. Answers kick(inFlight), to call after the page's first read and
// after each control.
function startLive(line, refresh) {
  stopLive();
  const me = { stopped: false, timer: null };
  live = me;
  const stamp = (inFlight) => {
    line.dataset.live = inFlight ? "on" : "off";
    line.dataset.updatedAt = String(Date.now());
    line.textContent = `Last updated ${new Date().toLocaleTimeString()}` +
      (inFlight ? " · updating while work is in flight" : " · nothing in flight, so not updating");
  };
  const schedule = (inFlight) => {
    clearTimeout(me.timer);
    if (inFlight && !me.stopped) me.timer = setTimeout(tick, LIVE_EVERY);
  };
  const tick = async () => {
    if (me.stopped) return;
    if (document.hidden) return schedule(true);
    let inFlight = false;
    try {
      inFlight = await refresh();
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) return signOut(err);
      showError(err);
      inFlight = true;
    }
    if (me.stopped) return;
    stamp(inFlight);
    schedule(inFlight);
  };
  return (inFlight) => {
    if (me.stopped) return;
    stamp(inFlight);
    schedule(inFlight);
  };
}

function liveLine() {
  return h("p", { class: "muted live-line", id: "last-updated", "aria-live": "polite" });
}

// ---- pages -------------------------------------------------------------------------------

function signInPage() {
  const input = h("input", { id: "token", type: "password", autocomplete: "off", required: true, size: 60 });
  const form = h("form", {
    id: "sign-in",
    onsubmit: async (e) => {
      e.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      const me = await act(() => api("GET", "/v1/account"));
      if (me) {
        sessionStorage.removeItem(SIGNED_OUT_KEY);
        signedIn = { token: token(), account: me };
        navigate("/plans");
      }
      else sessionStorage.removeItem(TOKEN_KEY);
    },
  },
  h("p", {}, h("label", { for: "token" }, "Account token ")),
  h("p", {}, input),
  h("p", {}, h("button", { type: "submit" }, "Sign in")));
  setMain(h("h1", {}, "Sign in"),
    h("p", { id: "signed-out", class: "notice", role: "alert", hidden: true }),
    h("p", { class: "muted" }, "The token stays in this browser tab's session."), form);
  showSignedOut();
  input.focus();
}

async function plansPage() {
  const plans = await api("GET", "/v1/coverage-plans");
  const rows = plans.map((p) => h("tr", {},
    h("td", {}, link(`/plans/${p.id}`, p.name)),
    h("td", {}, p.autoTopUp && !p.paused ? "on" : "off"),
    h("td", { class: "n" }, p.runsPerCell),
    h("td", {}, p.outerAxis),
    h("td", {}, targetLabel(p.bufferTarget)),
    h("td", {}, link(`/plans/${p.id}/queue`, "review queue"))));
  setMain(
    h("h1", {}, "Coverage plans"),
    plans.length === 0
      ? h("p", { class: "muted", id: "no-plans" }, "No plans yet.")
      : h("table", { id: "plans" },
        h("thead", {}, h("tr", {}, ["Plan", "Auto top-up", "Runs per cell", "Outer axis", "Buffer target", ""].map((t) => h("th", {}, t)))),
        h("tbody", {}, rows)));
}

// Long tables are shown a screenful first (fillRows below). `filling` holds work a page still
// does after it has painted; `render` waits for it before it marks the page complete.
const FIRST_ROWS = 100;
const BLOCK_ROWS = 200;
let filling = [];

// Rows rendered as they scroll into view: the first screenful (`first` rows) with the page, the
// rest as placeholder rows of `block` rows each, as tall as those rows will be (`rowHeight` px),
// which an IntersectionObserver swaps for their rows when they come within a screen of the
// viewport. A 10,000-row table costs the page one screenful, and a jump to its end one block.
// `cols` is the table's column count (a placeholder spans them).
function fillRows(tbody, n, make, before, { first = FIRST_ROWS, block = BLOCK_ROWS, rowHeight = 25, cols = 1 } = {}) {
  const add = (from, to, at) => {
    const f = document.createDocumentFragment();
    for (let i = from; i < to; i++) f.append(make(i));
    tbody.insertBefore(f, at);
  };
  add(0, Math.min(first, n), before || null);
  if (first >= n) return;
  const io = new IntersectionObserver((entries) => {
    for (const e of entries) {
      if (!e.isIntersecting || !e.target.isConnected) continue;
      io.unobserve(e.target);
      add(Number(e.target.dataset.from), Number(e.target.dataset.to), e.target);
      e.target.remove();
    }
  }, { rootMargin: "100% 0px" });
  const f = document.createDocumentFragment();
  for (let from = first; from < n; from += block) {
    const to = Math.min(from + block, n);
    const cell = h("td", { colspan: cols });
    cell.style.height = `${(to - from) * rowHeight}px`;
    const placeholder = h("tr", { class: "pending-rows", dataset: { from, to } }, cell);
    f.append(placeholder);
    io.observe(placeholder);
  }
  tbody.insertBefore(f, before || null);
}

// One matrix row, cloned from a template and filled in: ten thousand of them are built on the
// plan page, where h()'s generality costs more than the rows.
let matrixRowTemplate = null;
const MATRIX_COLS = [null, null, null, "completed", "inFlight", "pending", "unreviewed", "remaining", null];

function matrixRow(c) {
  if (!matrixRowTemplate) {
    matrixRowTemplate = h("tr", {}, MATRIX_COLS.map((col, i) =>
      h("td", { class: i >= 2 && i <= 7 ? "n" : null, dataset: col ? { col } : null })));
  }
  const tr = matrixRowTemplate.cloneNode(true);
  tr.dataset.cell = c.cellKey;
  const td = tr.children;
  td[0].textContent = pinLabel(c.case);
  td[1].textContent = comboLabel(c.combination);
  td[2].textContent = c.desired;
  td[3].textContent = c.completed;
  td[4].textContent = c.inFlight;
  td[5].textContent = c.pending;
  td[6].textContent = c.unreviewed;
  td[7].textContent = c.remaining;
  if (c.stale) td[8].append(h("span", { class: "tag stale", title: `latest version ${c.latestVersion}` }, `stale: ${c.latestVersion} is out`));
  if (c.unlaunchable) td[8].append(h("span", { class: "tag unlaunchable" }, `unlaunchable: ${reasonLabel(c.unlaunchable)}`));
  return tr;
}

// The matrix's filter: which cells a status names (every cell for "").
const CELL_FILTERS = {
  "": ["every cell", () => true],
  inFlight: ["runs in flight", (c) => c.inFlight > 0],
  pending: ["runs pending", (c) => c.pending > 0],
  unreviewed: ["runs to review", (c) => c.unreviewed > 0],
  remaining: ["runs still to launch", (c) => c.remaining > 0],
  done: ["complete", (c) => c.remaining === 0 && c.inFlight === 0 && c.pending === 0],
  flagged: ["stale or unlaunchable", (c) => !!(c.stale || c.unlaunchable)],
};
let matrixFilter = "";

// The matrix with its filter by status: the filter keeps the cells it names, in the API's order
// (the totals stay the plan's).
function matrixTable(m) {
  const table = matrixRows(m, matrixFilter);
  const select = h("select", {
    id: "matrix-filter",
    "aria-label": "show cells with",
    onchange: (e) => {
      matrixFilter = e.target.value;
      const next = matrixRows(m, matrixFilter);
      box.replaceChild(next, box.querySelector("#matrix"));
    },
  }, Object.entries(CELL_FILTERS).map(([v, [label]]) => h("option", { value: v, selected: v === matrixFilter }, label)));
  const box = h("div", { class: "matrix" }, h("p", { id: "spend", class: "muted" }, spendLabel(m)),
    h("p", { class: "filter" }, h("label", {}, "Show ", select)), table);
  return box;
}

function matrixRows(m, filter) {
  const head = ["Case", "Combination", "Desired", "Completed", "In flight", "Pending", "Unreviewed", "Remaining", "Notes"];
  const keep = (CELL_FILTERS[filter] || CELL_FILTERS[""])[1];
  const cells = filter ? m.cells.filter(keep) : m.cells;
  const t = m.totals || {};
  const totals = h("tr", { class: "totals", id: "totals" },
    h("td", { colspan: 2 }, `Plan totals (${m.cells.length} cells)`),
    ["desired", "completed", "inFlight", "pending", "unreviewed", "remaining"].map((k) =>
      h("td", { class: "n", dataset: { col: k } }, t[k] === undefined ? "" : t[k])),
    h("td", {}, ""));
  const body = h("tbody", {}, totals);
  fillRows(body, cells.length, (i) => matrixRow(cells[i]), totals, { cols: head.length });
  return h("table", { id: "matrix", class: "sticky", dataset: { filter, shown: cells.length } },
    h("thead", {}, h("tr", {}, head.map((x) => h("th", {}, x)))),
    body);
}

function topUpAnswer(a) {
  const parts = [h("p", {}, `Buffer target in force: ${targetLabel(a.bufferTarget)}; occupancy observed: ${a.occupancy === null ? "—" : a.occupancy}; enqueued: ${a.enqueued}.`)];
  if (a.skipped) parts.push(h("p", {}, h("span", { class: "tag skipped" }, `skipped: ${a.skipped}`)));
  if (a.launched.length) {
    parts.push(h("h3", {}, "Launched"), h("ol", { id: "launched" }, a.launched.map((l) =>
      h("li", {}, `${pinLabel(l.case)} × ${comboLabel(l.combination)} (pass ${l.pass}): `, l.jobIds.join(", ")))));
  }
  if (a.unlaunchable.length) {
    parts.push(h("h3", {}, "Unlaunchable"), h("ul", {}, a.unlaunchable.map((u) =>
      h("li", {}, `${u.case ? pinLabel(u.case) : u.cellKey} × ${comboLabel(u.combination)}: ${reasonLabel(u.unlaunchable)}`))));
  }
  return h("div", { class: "answer", id: "topup-answer" }, h("h2", {}, "Top-up"), parts);
}

// Runs an action whose refusal belongs next to a field: the API's error is shown in the banner
// (as act() does) and answered, so the field can say it too. Answers [value, error].
async function attempt(fn) {
  let failed = null;
  const value = await act(async () => {
    try {
      return await fn();
    } catch (err) {
      failed = err;
      throw err;
    }
  });
  return [value, failed];
}

// A field's note: what was saved (with the stored value) or why it was refused.
function fieldNote(id) {
  return h("span", { id: `${id}-note`, class: "field-note", role: "status" });
}

function noteSaid(note, refused, text) {
  note.textContent = text;
  note.dataset.outcome = refused ? "refused" : "saved";
}

// A buffer target's editor. `onsave(value)` answers the target the API stored; the fields then
// show it, and the note says it was saved (naming a clamp) or why it was refused, the fields
// going back to the stored value. An empty or negative bound is caught before anything is sent.
function targetEditor(id, label, current, allowInherit, onsave) {
  const kind = h("select", { id: `${id}-kind`, "aria-label": `${label}: kind` },
    allowInherit ? h("option", { value: "inherit" }, "inherit the account's (null)") : null,
    h("option", { value: "bounded" }, "bounded"),
    h("option", { value: "unbounded" }, "unbounded"));
  const runs = h("input", { id: `${id}-runs`, type: "number", min: 0, max: 500, "aria-label": `${label}: runs` });
  const note = fieldNote(id);
  let stored = current;
  const sync = () => { runs.disabled = kind.value !== "bounded"; };
  const show = (t) => {
    kind.value = t === null || t === undefined ? (allowInherit ? "inherit" : "bounded") : t.kind;
    runs.value = t && t.kind === "bounded" ? t.runs : "";
    sync();
  };
  kind.addEventListener("change", sync);
  show(current);
  const save = h("button", {
    type: "button",
    id: `${id}-save`,
    onclick: async () => {
      const raw = runs.value.trim();
      if (kind.value === "bounded" && !/^[0-9]+$/.test(raw)) {
        noteSaid(note, true, "runs: give a whole number of runs, 0 or more (0 never tops up)");
        runs.focus();
        return;
      }
      const value = kind.value === "inherit" ? null
        : kind.value === "unbounded" ? { kind: "unbounded" }
          : { kind: "bounded", runs: Number(raw) };
      const [saved, err] = await attempt(() => onsave(value));
      if (err) {
        show(stored);
        noteSaid(note, true, `refused: ${err.message}`);
        return;
      }
      stored = saved;
      show(saved);
      const clamped = value && value.kind === "bounded" && saved && saved.runs !== value.runs;
      noteSaid(note, false, `saved: ${targetLabel(saved)}` + (clamped ? ` (you asked for ${value.runs}; the API stores ${saved.runs})` : ""));
    },
  }, "Save");
  return h("fieldset", { id }, h("legend", {}, label), kind, " ", runs, " ", save, " ", note);
}

function planInput(p, changes) {
  return Object.assign({
    name: p.name,
    caseGroups: p.caseGroups,
    comboGroups: p.comboGroups,
    cases: p.cases,
    combinations: p.combinations,
    runsPerCell: p.runsPerCell,
    outerAxis: p.outerAxis,
    bufferTarget: p.bufferTarget,
    autoTopUp: p.autoTopUp,
    paused: p.paused,
  }, changes);
}

async function planPage(id) {
  // Opening the plan is the "opened" gesture: with auto top-up on, it tops up first.
  const [plan, matrix, settings] = await Promise.all([
    api("GET", `/v1/coverage-plans/${id}`),
    api("POST", `/v1/coverage-plans/${id}/open`),
    api("GET", "/v1/coverage-settings"),
  ]);
  let current = plan;
  const matrixBox = h("div", { id: "matrix-box" }, matrixTable(matrix));
  const answerBox = h("div", { id: "answer-box" });
  const matrixInFlight = (m) => !!m.totals && (m.totals.inFlight + m.totals.pending) > 0;
  const lastUpdated = liveLine();
  const read = async () => {
    const m = await api("GET", `/v1/coverage-plans/${id}/coverage`);
    matrixBox.replaceChildren(matrixTable(m));
    return matrixInFlight(m);
  };
  const kick = startLive(lastUpdated, read);
  const refresh = async () => kick(await read());
  const auto = h("input", {
    type: "checkbox",
    id: "auto-top-up",
    checked: plan.autoTopUp && !plan.paused,
    onchange: (e) => act(async () => {
      const on = e.target.checked;
      current = await api("PUT", `/v1/coverage-plans/${id}`, planInput(current, { autoTopUp: on, paused: !on }));
      if (on) {
        // Turned on: the plan is opened again, which tops it up.
        const m = await api("POST", `/v1/coverage-plans/${id}/open`);
        matrixBox.replaceChildren(matrixTable(m));
        kick(matrixInFlight(m));
      } else {
        await refresh();
      }
    }).then((r) => { if (r === undefined) e.target.checked = current.autoTopUp && !current.paused; }),
  });
  const dialog = h("dialog", { id: "halt-all-dialog" },
    h("p", {}, "Halt all cancels this plan's queued and pending jobs and also its dispatched, starting and running ones, which are partly or wholly paid for."),
    h("form", { method: "dialog" },
      h("button", { value: "cancel", id: "halt-all-cancel" }, "Keep them running"), " ",
      h("button", { value: "confirm", id: "halt-all-confirm", class: "danger" }, "Halt all")));
  dialog.addEventListener("close", () => {
    if (dialog.returnValue !== "confirm") return;
    act(async () => {
      const r = await api("POST", `/v1/coverage-plans/${id}/halt-all`, { confirm: true });
      answerBox.replaceChildren(h("div", { class: "answer", id: "halt-answer" }, `Halt all cancelled ${r.cancelled} jobs.`));
      current = await api("GET", `/v1/coverage-plans/${id}`);
      auto.checked = current.autoTopUp && !current.paused;
      await refresh();
    });
  });
  const controls = h("div", { class: "controls" },
    h("label", {}, auto, " Auto top-up"),
    h("button", {
      type: "button",
      id: "top-up-now",
      onclick: () => act(async () => {
        const a = await api("POST", `/v1/coverage-plans/${id}/topup`, {});
        answerBox.replaceChildren(topUpAnswer(a));
        await refresh();
      }),
    }, "Top up now"),
    h("button", {
      type: "button",
      id: "halt",
      onclick: () => act(async () => {
        const r = await api("POST", `/v1/coverage-plans/${id}/halt`);
        answerBox.replaceChildren(h("div", { class: "answer", id: "halt-answer" }, `Halt cancelled ${r.cancelled} queued or pending jobs.`));
        current = await api("GET", `/v1/coverage-plans/${id}`);
        auto.checked = current.autoTopUp && !current.paused;
        await refresh();
      }),
    }, "Halt"),
    h("button", { type: "button", id: "halt-all", class: "danger", onclick: () => dialog.showModal() }, "Halt all…"),
    targetEditor("plan-target", "Buffer target of this plan", plan.bufferTarget, true, async (value) => {
      current = await api("PUT", `/v1/coverage-plans/${id}`, planInput(current, { bufferTarget: value }));
      return current.bufferTarget;
    }),
    targetEditor("account-target", "Account default buffer target", settings.bufferTarget, false, async (value) => {
      return (await api("PUT", "/v1/coverage-settings", { bufferTarget: value })).bufferTarget;
    }));
  setMain(
    h("h1", {}, `Plan ${plan.name}`),
    workflowsLine(["its top-ups and runs", `BelayPlanId = "${id}"`]),
    h("p", {}, link(`/plans/${id}/queue`, "Review queue"), " · ", `${plan.runsPerCell} runs per cell, outer axis ${plan.outerAxis}`),
    controls, dialog, answerBox, lastUpdated, matrixBox);
  kick(matrixInFlight(matrix));
}

// What a build in a review frame may and may not do: the frame's sandbox and the artifact
// origin's policy (decision 0051) enforce it; the page says it, so a reviewer knows what a build
// that "does nothing" was allowed to try.
const FRAME_MAY = "run its scripts, draw, take your clicks and keys, and load this run's own files";
const FRAME_MAY_NOT = "read your belay session or token, call belay's API as you, fetch from or send to any other host, " +
  "navigate or open this page or new windows, take its frame to any other site, submit forms, or keep storage or cookies";
const TEXT_ARTIFACT = /\.(txt|log|md|json|jsonl|csv)$/i;
const TEXT_SHOWN = 64 * 1024;

// An artifact's path as a URL path under its tree, each segment encoded.
function artifactHref(base, path) {
  return base + path.split("/").map(encodeURIComponent).join("/");
}

// The page an HTML build opens on: index.html at the top when there is one, else the shallowest.
function entryArtifact(run) {
  const pages = run.artifacts.filter((a) => /\.html?$/i.test(a.path));
  pages.sort((a, b) => a.path.split("/").length - b.path.split("/").length ||
    (b.path.endsWith("index.html") - a.path.endsWith("index.html")) || a.path.localeCompare(b.path));
  return pages[0] || null;
}

// A signed URL for a run's artifacts, or why not: `{grant, refused}`. A signed-out session is
// the page's to handle, not the frame's.
async function mintArtifactUrl(runId) {
  try {
    return { grant: await api("POST", `/v1/runs/${runId}/artifact-url`), refused: null };
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) throw err;
    return { grant: null, refused: err };
  }
}

// One run's artifacts: its HTML build playing in a sandboxed frame on the artifact origin (under
// a short-lived URL granting this run's files only), its text artifacts inline, and the whole
// tree as one download. Self-contained (no ids): a page may show several runs side by side.
async function artifactView(run, minted) {
  const view = h("section", { class: "artifact-view", dataset: { run: run.id } }, h("h2", {}, "Artifacts"));
  if (!run.artifacts.length) {
    view.append(h("p", { class: "muted" }, "No artifacts."));
    return view;
  }
  let { grant, refused } = minted || await mintArtifactUrl(run.id);
  const entry = entryArtifact(run);
  const tools = h("p", { class: "artifact-tools" });
  if (grant) {
    tools.append(h("a", { class: "download-build", href: grant.archiveUrl, rel: "noopener noreferrer" },
      `Download build (${run.artifacts.length} file${run.artifacts.length === 1 ? "" : "s"}, .tar.gz)`));
  }
  view.append(tools);
  if (entry && grant) {
    const frame = h("iframe", {
      class: "artifact-frame",
      title: `build of run ${run.id}: ${entry.path}`,
      // Scripts on; no same-origin (an opaque origin: no storage, no cookies), no top navigation,
      // no popups, no modal dialogs. The artifact origin's policy adds the network limits.
      sandbox: "allow-scripts allow-pointer-lock",
      referrerpolicy: "no-referrer",
      src: artifactHref(grant.url, entry.path),
      dataset: { run: run.id, entry: entry.path },
    });
    // The build has loaded with its scripts and assets: `belay bench console` reads the mark.
    frame.addEventListener("load", () => performance.mark(`belay:frame ${run.id}`), { once: true });
    const expires = h("span", { class: "artifact-expiry" });
    const showExpiry = (g) => {
      expires.textContent = `This link works until ${new Date(g.expiresAt * 1000).toLocaleTimeString()}.`;
    };
    showExpiry(grant);
    const reload = h("button", {
      type: "button",
      class: "reload-build",
      onclick: () => act(async () => {
        grant = await api("POST", `/v1/runs/${run.id}/artifact-url`);
        frame.src = artifactHref(grant.url, entry.path);
        const dl = tools.querySelector(".download-build");
        if (dl) dl.href = grant.archiveUrl;
        showExpiry(grant);
      }),
    }, "Restart build");
    view.append(
      h("p", { class: "frame-rules" },
        h("strong", {}, "Scripts are on in this frame. "),
        `The build may ${FRAME_MAY}. It may not ${FRAME_MAY_NOT}. `, expires, " ", reload),
      frame);
  } else if (entry && refused) {
    view.append(h("p", { class: "frame-rules" },
      `This build cannot be played here: ${refused.message}`));
  }
  const items = [];
  for (const a of run.artifacts) {
    const item = h("li", {}, h("code", {}, a.path), ` (${a.size} bytes)`);
    if (TEXT_ARTIFACT.test(a.path)) {
      const pre = h("pre", { class: "artifact-text", dataset: { path: a.path } });
      const resp = await fetch(`/v1/runs/${run.id}/artifact?path=${encodeURIComponent(a.path)}`,
        { headers: { Authorization: "Bearer " + token() } });
      if (resp.ok) {
        const text = await resp.text();
        pre.textContent = text.length > TEXT_SHOWN
          ? text.slice(0, TEXT_SHOWN) + `\n… (${text.length - TEXT_SHOWN} more characters in the download)`
          : text;
      } else {
        pre.textContent = `(not shown: ${resp.status})`;
      }
      item.append(pre);
    }
    items.push(item);
  }
  view.append(h("ul", { class: "artifact-list" }, items));
  return view;
}

// ---- reviewing -----------------------------------------------------------------------------
// A review is given from the keyboard: each rating row takes the focus in turn, a number key
// chooses (1 = the worst, 5 = the best), Enter submits the repeat's review and moves on. Every
// control shows its key.

const TEST_TYPE_WORDS = { standard: "standard", game_jam: "game jam", performance: "performance (graded by machine)" };

// A row of choices, one per key: `choices` are [value, label] pairs, worst first.
function choiceRow(name, choices, current, onchosen) {
  const row = h("div", {
    class: "choice", role: "radiogroup", tabindex: 0, "aria-label": name,
    dataset: { name, value: current || "" },
  });
  const set = (v) => {
    row.dataset.value = v;
    for (const b of row.querySelectorAll("button.opt")) {
      b.setAttribute("aria-checked", b.dataset.value === v ? "true" : "false");
    }
  };
  choices.forEach(([v, label], i) => row.append(h("button", {
    type: "button", class: "opt", role: "radio", tabindex: -1, dataset: { value: v },
    onclick: () => { set(v); row.focus(); },
  }, h("kbd", {}, String(i + 1)), " ", label)));
  if (current) set(current);
  row.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const n = Number(e.key);
    if (Number.isInteger(n) && n >= 1 && n <= choices.length) {
      e.preventDefault();
      e.stopPropagation();
      set(choices[n - 1][0]);
      onchosen(row);
    }
  });
  return row;
}

function ratingsLabel(ratings) {
  return Object.entries(ratings || {}).map(([d, r]) => `${d}: ${r}`).join(", ");
}

// The worst domain of one review, as the spec counts it: the lowest rating of any one domain.
function worstDomain(ratings) {
  let worst = null;
  for (const [d, r] of Object.entries(ratings || {})) {
    if (worst === null || RATINGS.indexOf(r) < RATINGS.indexOf(worst[1])) worst = [d, r];
  }
  return worst;
}

function categoryLabel(c) {
  const found = CATEGORIES.find(([v]) => v === c);
  return found ? `${found[1]} ${found[0]}` : String(c);
}

function reviewSummary(rv) {
  if (rv.category) return `category ${categoryLabel(rv.category)}`;
  const w = worstDomain(rv.ratings);
  return `${ratingsLabel(rv.ratings)}` + (w ? ` (worst domain: ${w[0]}, ${w[1]})` : "");
}

// One repeat's review form. `offered` is the API's offered domains; `mine` the caller's review of
// the run when there is one (the form then revises it). The first rating row is `form.first`.
function reviewForm(run, offered, mine, onsubmitted) {
  const form = h("form", { class: "review", dataset: { run: run.id } });
  const jam = run.testType === "game_jam";
  const fields = h("fieldset", {}, h("legend", {}, jam ? "Category (1 = 💩 … 5 = 💎)" : "Ratings (1 = broken … 5 = flawless)"));
  const rows = h("div", { class: "domains" });
  const next = (row) => {
    const all = [...form.querySelectorAll(".choice")];
    const i = all.indexOf(row);
    (all[i + 1] || row).focus();
  };
  const ratingChoices = RATINGS.map((r) => [r, r]);
  const addDomain = (name, current, free) => {
    const label = free
      ? h("input", { class: "domain", value: name, "aria-label": "domain name", size: 12, placeholder: "domain" })
      : h("span", { class: "domain-name" }, name);
    const row = choiceRow(name || "new domain", ratingChoices, current, next);
    if (free) {
      row.dataset.name = "";
      label.addEventListener("input", () => {
        row.dataset.name = label.value.trim();
        row.setAttribute("aria-label", label.value.trim());
      });
    }
    rows.append(h("div", { class: "row" }, label, row));
    return row;
  };
  if (jam) {
    rows.append(h("div", { class: "row" }, choiceRow("category", CATEGORIES.map(([v, e]) => [v, `${e} ${v}`]), mine && mine.category, next)));
  } else {
    const domains = [...offered.domains];
    for (const d of Object.keys((mine && mine.ratings) || {})) if (!domains.includes(d)) domains.push(d);
    for (const d of domains) addDomain(d, mine && mine.ratings ? mine.ratings[d] : null, false);
  }
  fields.append(rows);
  if (!jam) {
    fields.append(h("p", { class: "muted source" }, offered.source === "case_version"
      ? "Domains declared by the case version."
      : offered.source === "remembered" ? "Your domains, as your last review named them." : "No domains declared: rate it overall, or add your own."));
    fields.append(h("button", {
      type: "button", class: "add-domain", dataset: { key: "+" },
      onclick: () => addDomain("", null, true).previousSibling.focus(),
    }, h("kbd", {}, "+"), " Add a domain"));
  }
  const note = h("textarea", { class: "note", rows: 2, cols: 30, "aria-label": "note" });
  if (mine && mine.note) note.value = mine.note;
  fields.append(h("div", { class: "row" }, h("label", {}, h("kbd", {}, "N"), " Note ", note)));
  const submit = h("button", { type: "submit", class: "submit-review" }, h("kbd", {}, "Enter"), mine ? " Submit revised review" : " Submit review");
  form.append(fields, h("p", {}, submit));
  form.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && e.target.tagName !== "TEXTAREA" && e.target.tagName !== "BUTTON") {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    act(async () => {
      const body = {};
      if (jam) {
        const v = rows.querySelector(".choice").dataset.value;
        if (!v) throw new Error("Choose a category first: keys 1 (💩) to 5 (💎).");
        body.category = v;
      } else {
        body.ratings = {};
        for (const row of rows.querySelectorAll(".choice")) {
          const name = row.dataset.name;
          if (!row.dataset.value) {
            if (!name || row.closest(".row").querySelector("input.domain")) continue;
            row.focus();
            throw new Error(`Rate ${name} first: keys 1 (broken) to 5 (flawless).`);
          }
          if (!name) throw new Error("Name the added domain, or leave it unrated.");
          body.ratings[name] = row.dataset.value;
        }
      }
      if (note.value.trim()) body.note = note.value.trim();
      const review = await api("POST", `/v1/runs/${run.id}/review`, body);
      await onsubmitted(review);
    });
  });
  form.first = rows.querySelector(".choice");
  return form;
}

// A repeat's own facts (the cell's pin and combination are the heading above the repeats).
function runFacts(run) {
  return h("table", { class: "run-facts" }, h("tbody", {},
    h("tr", {}, h("th", {}, "Run"), h("td", { class: "run-id" }, link(`/runs/${run.id}`, run.id))),
    h("tr", {}, h("th", {}, "Loaded"), h("td", {}, run.loaded ? "yes" : "no (the build did not load)")),
    h("tr", {}, h("th", {}, "Completed"), h("td", {}, when(run.completedAt)))));
}

// One repeat of the queue's current cell: its facts, the caller's review (or the form) and its build.
async function repeatView(run, me, offered, position, onreviewed, reviews, minted) {
  const mine = reviews.find((rv) => rv.accountId === me.id) || null;
  let current = mine;
  const section = h("section", { class: "repeat", dataset: { run: run.id, reviewed: mine ? "true" : "false" } });
  const body = h("div", { class: "verdict-box" });
  const showForm = (current) => {
    const form = reviewForm(run, offered, current, async (review) => {
      section.dataset.reviewed = "true";
      showMine(review);
      await onreviewed(section);
    });
    body.replaceChildren(form);
    section.form = form;
    return form;
  };
  const showMine = (rv) => {
    current = rv;
    section.form = null;
    body.replaceChildren(h("div", { class: "mine", dataset: { worst: rv.category || (worstDomain(rv.ratings) || [])[1] || "" } },
      h("p", {}, h("strong", {}, "Your review: "), reviewSummary(rv), rv.note ? ` · “${rv.note}”` : ""),
      h("button", {
        type: "button", class: "revise", onclick: () => section.revise(),
      }, h("kbd", {}, "R"), " Revise my review")));
  };
  if (mine) showMine(mine); else showForm(null);
  section.revise = () => { const f = showForm(current); if (f.first) f.first.focus(); };
  const others = reviews.filter((rv) => rv.accountId !== me.id).length;
  section.append(...[
    h("h2", {}, `Repeat ${position}`),
    runFacts(run),
    others ? h("p", { class: "muted" }, `${others} other reviewer${others === 1 ? "" : "s"} reviewed it.`) : null,
    body,
    await artifactView(run, minted)].filter((x) => x !== null && x !== undefined));
  return section;
}

// The queue, a cell at a time: every unreviewed repeat of the cell side by side, each rated on
// its own and in any order; the next cell comes when all of them are. Back returns to a cell
// already walked (its reviews shown, each revisable); Skip leaves a cell for later.
async function queuePage(kind, id) {
  const base = kind === "ladder" ? `/v1/ladders/${id}` : `/v1/coverage-plans/${id}`;
  const back = kind === "ladder" ? `/ladders/${id}` : `/plans/${id}`;
  const [me, first] = await Promise.all([api("GET", "/v1/account"), api("GET", `${base}/queue`)]);
  let q = first;
  const walked = []; // cells shown, in order: {cellKey, runs}
  let at = -1;
  const passed = new Set(); // cells done or skipped in this walk
  const count = h("span", { id: "queue-count" });
  let left = q.runs.length;
  const showCount = () => {
    count.textContent = `${left} run${left === 1 ? "" : "s"} to review${q.truncated ? " (more behind these)" : ""}`;
  };
  showCount();
  const position = h("p", { id: "cell-position" });
  const stage = h("div", { id: "stage" });
  const keyHelp = h("p", { class: "muted keys", id: "keys" },
    h("kbd", {}, "1"), "–", h("kbd", {}, "5"), " rate · ", h("kbd", {}, "Enter"), " submit and move on · ",
    h("kbd", {}, "Tab"), " next field · ", h("kbd", {}, "R"), " revise · ", h("kbd", {}, "B"), " back · ",
    h("kbd", {}, "S"), " skip the cell · ", h("kbd", {}, "N"), " note · ", h("kbd", {}, "+"), " add a domain");
  const backBtn = h("button", { type: "button", id: "prev-cell", onclick: () => act(() => go(at - 1)) }, h("kbd", {}, "B"), " Back");
  const skipBtn = h("button", { type: "button", id: "skip-cell", onclick: () => act(() => skip()) }, h("kbd", {}, "S"), " Skip this cell");
  const nav = h("div", { class: "controls", id: "cell-nav" }, backBtn, skipBtn, position);

  const repeats = () => [...stage.querySelectorAll("section.repeat")];
  const focusNext = (from) => {
    const all = repeats();
    const i = all.indexOf(from);
    const order = [...all.slice(i + 1), ...all.slice(0, Math.max(i, 0))];
    const todo = order.find((s) => s.dataset.reviewed !== "true" && s.form);
    if (todo && todo.form.first) todo.form.first.focus();
    return !!todo;
  };

  const showCell = async (cell) => {
    // Everything the repeats show is read at once (each run, its domains, its reviews, and as
    // soon as the run says it has a build, the build's signed URL), so the cell's builds start
    // loading together.
    const each = (f) => Promise.all(cell.runs.map(f));
    const read = each(async (r) => {
      const run = await api("GET", `/v1/runs/${r}`);
      return [run, run.artifacts.length ? await mintArtifactUrl(r) : { grant: null, refused: null }];
    });
    const [both, offered, reviews] = await Promise.all([
      read,
      each((r) => api("GET", `/v1/runs/${r}/review-domains`)),
      each((r) => api("GET", `/v1/runs/${r}/reviews`))]);
    const runs = both.map(([run]) => run);
    const minted = both.map(([, m]) => m);
    const sections = await Promise.all(runs.map((run, i) =>
      repeatView(run, me, offered[i], `${i + 1} of ${runs.length}`, async (section) => {
        if (!section.counted) { section.counted = true; left = Math.max(0, left - 1); showCount(); }
        if (!focusNext(section)) {
          passed.add(cell.cellKey);
          if (at === walked.length - 1) await go(at + 1);
          else section.querySelector("button.revise").focus();
        }
      }, reviews[i], minted[i])));
    for (const s of sections) s.counted = s.dataset.reviewed === "true";
    const r0 = runs[0];
    stage.replaceChildren(h("div", { id: "cell", dataset: { cell: cell.cellKey } },
      h("h2", { id: "cell-title" }, `${pinLabel(r0.case)} × ${comboLabel(r0.combination)}`),
      h("div", { class: "repeats", style: `--repeats: ${Math.min(runs.length, 5)}` }, sections)));
    position.textContent = `Cell ${at + 1} of this walk · ${runs.length} repeat${runs.length === 1 ? "" : "s"}`;
    backBtn.disabled = at <= 0;
    const todo = sections.find((s) => s.dataset.reviewed !== "true");
    const f = (todo || sections[0]).querySelector(".choice, button.revise");
    if (f) f.focus();
  };

  // Moves to the walk's cell `i`; past the end, to the queue's next cell not yet passed.
  const go = async (i) => {
    if (i < 0) return;
    if (i < walked.length) {
      at = i;
      await showCell(walked[at]);
      return;
    }
    q = await api("GET", `${base}/queue`);
    left = q.runs.length;
    showCount();
    let cell = q.cells.find((c) => !passed.has(c.cellKey));
    if (!cell && q.cells.length) {
      // Only skipped cells remain: offer them again.
      passed.clear();
      cell = q.cells[0];
    }
    if (!cell) {
      at = walked.length;
      stage.replaceChildren(h("p", { id: "queue-empty" }, "Nothing waits for your review."));
      position.textContent = "";
      backBtn.disabled = walked.length === 0;
      backBtn.focus();
      return;
    }
    walked.splice(at + 1);
    walked.push(cell);
    at = walked.length - 1;
    await showCell(cell);
  };
  const skip = async () => {
    if (at >= 0 && at < walked.length) passed.add(walked[at].cellKey);
    await go(at + 1);
  };

  setMain(
    h("h1", {}, "Review queue"),
    h("p", {}, link(back, kind === "ladder" ? "Back to the ladder" : "Back to the plan"), " · ", count),
    keyHelp, nav, stage);
  pageKeys = (e) => {
    const section = document.activeElement && document.activeElement.closest ? document.activeElement.closest("section.repeat") : null;
    const key = e.key.toLowerCase();
    if (key === "b") backBtn.click();
    else if (key === "s") skipBtn.click();
    else if (key === "r") {
      const s = section || repeats().find((x) => x.dataset.reviewed === "true");
      if (s && s.dataset.reviewed === "true") s.revise();
    } else if (key === "n" && section && section.form) section.form.querySelector("textarea.note").focus();
    else if (key === "+" && section && section.form) section.form.querySelector(".add-domain").click();
    else return false;
    return true;
  };
  if (q.cells.length === 0) {
    stage.replaceChildren(h("p", { id: "queue-empty" }, "Nothing waits for your review."));
    backBtn.disabled = true;
    skipBtn.disabled = true;
    return;
  }
  await go(0);
}

// Page-wide keys of the current page (none unless it sets them); a key typed into a text field
// is the field's, never a command.
let pageKeys = null;
document.addEventListener("keydown", (e) => {
  if (!pageKeys || e.ctrlKey || e.metaKey || e.altKey || e.defaultPrevented) return;
  const t = e.target;
  if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable)) return;
  if (pageKeys(e)) e.preventDefault();
});

// ---- a run ---------------------------------------------------------------------------------

const JOB_STATUS_WORDS = {
  queued: "queued", pending: "held back by the queue", dispatched: "dispatched", starting: "starting",
  running: "running", completed: "completed", failed: "failed", canceled: "canceled",
};

function when(ms) {
  return ms ? new Date(ms).toLocaleString() : "—";
}

// Every attempt of the run's job and of the jobs it retries (an infrastructure failure is
// retried as a new job; a rate limit runs the adapter again in the same job): where each ran,
// its exit, its failure class and message, and the end of its log.
const FAILURE_CLASS_WORDS = {
  infra: "infrastructure (retried)", task: "task failed (kept as evidence)",
  provider_rate_limited: "rate limited (retried after a backoff)", provider_refused: "refused by the provider (plan paused)",
};

async function attemptsView(run) {
  const attempts = await api("GET", `/v1/jobs/${run.jobId}/attempts`);
  return h("table", { id: "attempts" },
    h("thead", {}, h("tr", {}, ["Attempt", "Job", "Started", "Ended", "Worker", "Exit", "Outcome", "Failure message", "Log tail"].map((t) => h("th", {}, t)))),
    h("tbody", {}, attempts.map((a) => h("tr", { dataset: { job: a.jobId, class: a.failureClass || "" } },
      h("td", { class: "n" }, `${a.jobAttempt}.${a.n}`),
      h("td", {}, a.jobId),
      h("td", {}, when(a.startedAt)),
      h("td", {}, when(a.endedAt)),
      h("td", {}, a.worker || "—"),
      h("td", {}, a.exit === null || a.exit === undefined ? "—" : `exit ${a.exit}`),
      h("td", {}, a.failureClass ? (FAILURE_CLASS_WORDS[a.failureClass] || a.failureClass) : "completed"),
      h("td", { class: "failure" }, a.message || "none"),
      h("td", {}, a.logTail ? h("details", {}, h("summary", {}, "log"), h("pre", {}, a.logTail)) : "—")))));
}

async function runPage(id) {
  const [me, run, reviews, offered] = await Promise.all([
    api("GET", "/v1/account"),
    api("GET", `/v1/runs/${id}`),
    api("GET", `/v1/runs/${id}/reviews`),
    api("GET", `/v1/runs/${id}/review-domains`),
  ]);
  const mine = reviews.find((rv) => rv.accountId === me.id) || null;
  const jam = run.testType === "game_jam";
  const reviewRows = reviews.map((rv) => {
    const w = worstDomain(rv.ratings);
    return h("tr", { dataset: { account: rv.accountId, worst: w ? w[1] : (rv.category || "") } },
      h("td", {}, rv.accountId === me.id ? `${me.name || rv.accountId} (you)` : rv.accountId),
      h("td", {}, jam ? categoryLabel(rv.category) : ratingsLabel(rv.ratings)),
      h("td", { class: "worst" }, jam ? "—" : (w ? `${w[1]} (${w[0]})` : "—")),
      h("td", {}, rv.note || ""),
      h("td", {}, when(rv.updatedAt)));
  });
  const reviseBox = h("div", { id: "revise-box" });
  const openForm = () => {
    const form = reviewForm(run, offered, mine, async () => { await render(); });
    form.id = "run-review-form";
    reviseBox.replaceChildren(form);
    if (form.first) form.first.focus();
  };
  const revise = h("button", { type: "button", id: "revise", onclick: openForm },
    h("kbd", {}, "R"), mine ? " Revise my review" : " Review this run");
  const shown = jam
    ? (run.category ? `worst category across every reviewer: ${categoryLabel(run.category)}` : "not reviewed yet")
    : (run.rating ? `worst domain across every reviewer: ${run.rating}` : "not reviewed yet");
  const manifest = h("table", { id: "manifest" }, h("tbody", {},
    h("tr", {}, h("th", {}, "Outcome"), h("td", {}, "completed (the adapter exited 0 and its manifest said so)")),
    h("tr", {}, h("th", {}, "Build loaded"), h("td", {}, run.loaded ? "yes" : "no: the build never loaded")),
    h("tr", {}, h("th", {}, "Artifacts listed"), h("td", {}, run.artifacts.length ? run.artifacts.map((a) => a.path).join(", ") : "none")),
    h("tr", {}, h("th", {}, "Completed at"), h("td", {}, when(run.completedAt)))));
  setMain(
    h("h1", {}, `Run ${run.id}`),
    workflowsLine(["this run's workflow", `WorkflowId = "run-${run.jobId}"`]),
    h("p", { class: "muted" }, "Keys: ", h("kbd", {}, "R"), " revise my review, then ", h("kbd", {}, "1"), "–", h("kbd", {}, "5"), " rate and ", h("kbd", {}, "Enter"), " submit."),
    h("table", { id: "run-facts" }, h("tbody", {},
      h("tr", {}, h("th", {}, "Pin"), h("td", { id: "run-pin" }, pinLabel(run.case))),
      h("tr", {}, h("th", {}, "Combination"), h("td", { id: "run-combination" }, comboLabel(run.combination) + (run.ggConfigName ? ` (${run.ggConfigName})` : ""))),
      h("tr", {}, h("th", {}, "Test type"), h("td", {}, TEST_TYPE_WORDS[run.testType] || run.testType)),
      h("tr", {}, h("th", {}, "Rating shown"), h("td", { id: "run-rating", dataset: { rating: run.rating || run.category || "" } }, shown)))),
    h("h2", {}, "Job and attempts"), await attemptsView(run),
    h("h2", {}, "The adapter's manifest"), manifest,
    h("h2", {}, "Reviews"),
    reviews.length ? h("table", { id: "reviews" },
      h("thead", {}, h("tr", {}, ["Reviewer", jam ? "Category" : "Ratings", "Worst domain", "Note", "Updated"].map((t) => h("th", {}, t)))),
      h("tbody", {}, reviewRows)) : h("p", { class: "muted", id: "no-reviews" }, "No reviews yet."),
    run.testType === "performance" ? h("p", { class: "muted" }, "Performance runs are graded by machine and take no review.")
      : h("div", { class: "controls" }, revise),
    reviseBox,
    await artifactView(run));
  pageKeys = run.testType === "performance" ? null : (e) => {
    if (e.key.toLowerCase() !== "r" || reviseBox.firstChild) return false;
    openForm();
    return true;
  };
  if (run.testType !== "performance") revise.focus();
}

// ---- ladders -----------------------------------------------------------------------------

const AXIS_LABELS = { rung: "Rung by rung", combination: "Model by model" };

function ladderInput(l, changes) {
  return Object.assign({
    name: l.name,
    rungs: l.rungs.map((r) => Object.assign(
      { id: r.id, slug: r.case.slug, version: r.case.version, variant: r.case.variant, engine: r.case.engine },
      r.runs === null || r.runs === undefined ? {} : { runs: r.runs })),
    comboGroups: l.comboGroups,
    combinations: l.combinations,
    runsPerCell: l.runsPerCell,
    gate: l.gate,
    unloadedCountsAsBroken: l.unloadedCountsAsBroken,
    earlyStop: l.earlyStop,
    outerAxis: l.outerAxis,
    bufferTarget: l.bufferTarget,
    autoTopUp: l.autoTopUp,
    enabled: l.enabled,
  }, changes);
}

async function laddersPage() {
  const ladders = await api("GET", "/v1/ladders");
  setMain(
    h("h1", {}, "Ladders"),
    ladders.length === 0
      ? h("p", { class: "muted", id: "no-ladders" }, "No ladders yet.")
      : h("table", { id: "ladders" },
        h("thead", {}, h("tr", {}, ["Ladder", "Climbing", "Rungs", "Order", ""].map((t) => h("th", {}, t)))),
        h("tbody", {}, ladders.map((l) => h("tr", {},
          h("td", {}, link(`/ladders/${l.id}`, l.name)),
          h("td", {}, l.enabled ? "on" : "off"),
          h("td", { class: "n" }, l.rungs.length),
          h("td", {}, AXIS_LABELS[l.outerAxis] || l.outerAxis),
          h("td", {}, link(`/ladders/${l.id}/queue`, "review queue")))))));
}

function tallyLabel(t) {
  if (!t) return "";
  return `passing ${t.passing} of ${t.required} needed · completed ${t.completed}, judged ${t.judged}, unjudged ${t.unjudged}, pending ${t.pending}`;
}

// The five statuses, and whose move each one is (the spec's table).
const STATUSES = {
  climbing: "runs are still to complete on the current rung; the ladder's move",
  awaitingReview: "the rung ran everything it was going to; nothing will move until you look",
  walled: "the current rung was failed; yours, if you disagree",
  held: "stopped by hand; yours",
  toppedOut: "every rung cleared; it is done",
};

// A climber's state as the board shows it, in a short label and a colour: the spec's status,
// read with the ladder's switch and what is in flight. A disabled ladder is off everywhere; an
// enabled climber "climbing" with nothing in flight on its rung waits for a top-up.
const STATES = {
  off: ["off", "the ladder is disabled: nothing launches until it is enabled"],
  waiting: ["waiting for a top-up", "nothing is in flight on its current rung: the next top-up (Top up now, or a review with auto top-up on) launches its runs"],
  climbing: ["climbing", STATUSES.climbing],
  awaitingReview: ["needs your review", STATUSES.awaitingReview],
  walled: ["walled", STATUSES.walled],
  held: ["held", STATUSES.held],
  toppedOut: ["topped out", STATUSES.toppedOut],
};

function climberState(enabled, c) {
  if (!enabled) return "off";
  if (c.status !== "climbing") return c.status;
  const here = c.rungs.find((st) => st.rungId === c.currentRung && !st.stale);
  return here && here.tally && here.tally.pending > 0 ? "climbing" : "waiting";
}

// What a state means, on hover; the spec's status beside it when the board reads it otherwise.
function stateTitle(state, c) {
  const meaning = STATES[state][1];
  return state === c.status ? meaning : `${meaning} (status ${c.status}: ${STATUSES[c.status] || ""})`;
}

function stateBadge(cls, state, c, prefix = "") {
  return h("div", { class: `${cls} state`, dataset: { status: c.status, state }, title: stateTitle(state, c) }, prefix + STATES[state][0]);
}

// One climber's cell on one rung. Controls only on a rung the climber has reached (`reached`):
// a verdict beyond it moves nothing.
function standingCell(l, climber, rung, standings, onchange, reached, state) {
  const here = climber.currentRung === rung.rungId;
  const parts = [];
  if (here) parts.push(stateBadge("status", state, climber, "▶ "));
  const tallies = [];
  for (const st of standings) {
    // The gate's verdict first; an override sits beside it, never over it.
    const verdict = h("div", {
      class: "verdict",
      dataset: { verdict: st.verdict, outcome: st.outcome, override: st.override || "", stale: st.stale ? "true" : "false", recorded: st.recorded ? "true" : "false" },
    },
    h("span", { class: "gate" }, "gate: ", h("strong", {}, st.verdict)),
    st.override ? h("span", { class: "tag override", title: "a reviewer's override, stored beside the gate's verdict" }, ` override: ${st.override}`) : null,
    !st.recorded && !st.stale && st.verdict !== "undecided" ? h("span", { class: "tag live", title: "computed live; the next top-up records it" }, " recorded: false") : null,
    st.stale ? h("span", { class: "tag stale" }, ` stale: decided on ${st.version}`) : null);
    parts.push(verdict);
    if (st.tally) {
      tallies.push(tallyLabel(st.tally));
      parts.push(h("div", { class: "tally muted" }, tallyLabel(st.tally)));
    }
    if (reached && !st.stale && st.verdict !== "undecided") {
      const post = (outcome) => act(async () => {
        await api("POST", `/v1/ladders/${l.id}/outcomes`, { combination: climber.combination, rungId: rung.rungId, outcome });
        await onchange();
      });
      parts.push(h("div", { class: "row" },
        st.outcome === "wall" ? h("button", { type: "button", class: "promote", onclick: () => post("advance") }, "Promote past the wall") : null,
        st.outcome === "advance" ? h("button", { type: "button", class: "wall", onclick: () => post("wall") }, "Wall here") : null, " ",
        st.override ? h("button", {
          type: "button",
          class: "clear-override",
          onclick: () => act(async () => {
            await api("DELETE", `/v1/ladders/${l.id}/outcomes`, { combination: climber.combination, rungId: rung.rungId });
            await onchange();
          }),
        }, "Clear override") : null));
    }
  }
  const live = standings.find((st) => !st.stale);
  return h("td", {
    dataset: { climber: climber.climberKey, rung: rung.rungId, reached: reached ? "true" : "false", state: here ? state : null, verdict: live ? live.outcome : null },
    title: tallies.join("\n") || null,
  }, parts);
}

function steeringControls(l, climber, onchange) {
  const s = climber.steering;
  const send = (changes) => act(async () => {
    await api("POST", `/v1/ladders/${l.id}/climbers`, Object.assign({ combination: climber.combination }, changes));
    await onchange();
  });
  const priority = h("input", { type: "number", class: "priority", value: s.priority, min: -1000, max: 1000, size: 4, "aria-label": `priority of ${comboLabel(climber.combination)}` });
  priority.addEventListener("change", async () => {
    // A refused priority does not stay in its field: it shows the stored one again.
    const [, err] = await attempt(async () => {
      await api("POST", `/v1/ladders/${l.id}/climbers`, { combination: climber.combination, priority: Number(priority.value) });
      await onchange();
    });
    if (err) priority.value = s.priority;
  });
  return h("div", { class: "steering" },
    h("label", {}, "priority ", priority), " ",
    h("label", {}, h("input", { type: "checkbox", class: "focused", checked: s.focused, onchange: (e) => send({ focused: e.target.checked }) }), " focused"), " ",
    h("label", {}, h("input", { type: "checkbox", class: "held", checked: s.held, onchange: (e) => send({ held: e.target.checked }) }), " held"));
}

// The board's table: rungs down, the climbers the filter keeps across, rows filled as they
// scroll into view. `view.filter` is a state of STATES ("" keeps every climber).
function boardTable(ladder, progress, view, onchange) {
  const order = progress.rungs.map((r) => r.rungId);
  const climbers = progress.climbers
    .map((c) => ({ c, state: climberState(progress.enabled, c), at: c.currentRung === null ? order.length : order.indexOf(c.currentRung) }))
    .filter((x) => !view.filter || x.state === view.filter);
  const head = h("tr", {}, h("th", {}, "Rung"),
    climbers.map(({ c, state }) => h("th", { dataset: { climber: c.climberKey, state } },
      h("div", {}, comboLabel(c.combination)),
      stateBadge("climber-status", state, c),
      c.unlaunchable ? h("div", { class: "tag unlaunchable" }, `unlaunchable: ${reasonLabel(c.unlaunchable)}`) : null,
      steeringControls(ladder, c, onchange))));
  const rows = h("tbody", {});
  const rungRow = (i) => {
    const r = progress.rungs[i];
    return h("tr", { dataset: { rung: r.rungId } },
      h("th", {}, rungHeader(ladder, progress, i, onchange)),
      climbers.map(({ c, state, at }) => standingCell(ladder, c, r, c.rungs.filter((st) => st.rungId === r.rungId), onchange, i <= at, state)));
  };
  const table = h("table", { id: "board", class: `sticky${view.tallies ? " tallies" : ""}`, dataset: { filter: view.filter, shown: climbers.length } },
    h("thead", {}, head), rows);
  // A rung's row holds one cell per climber: a screenful is FIRST_ROWS cells' worth of rungs.
  const perRow = Math.max(1, climbers.length);
  fillRows(rows, progress.rungs.length, rungRow, null, {
    first: Math.ceil(FIRST_ROWS / perRow) + 2, block: 4, rowHeight: 64, cols: climbers.length + 1,
  });
  return table;
}

// A rung's header: its place and pin, its runs (its own, or the ladder's), and moving it up or
// down the ladder's order.
function rungHeader(ladder, progress, i, onchange) {
  const r = progress.rungs[i];
  const rungs = progress.rungs.map((x) => x.rungId);
  const move = (by) => act(async () => {
    const to = i + by;
    [rungs[i], rungs[to]] = [rungs[to], rungs[i]];
    await api("POST", `/v1/ladders/${ladder.id}/rungs/order`, { rungIds: rungs });
    await onchange();
  });
  return [
    h("div", {}, `${i + 1}. ${pinLabel(r.case)} · ${r.runs} runs`),
    r.behind ? h("div", { class: "tag stale" }, `pin behind: ${r.latestVersion} is out`) : null,
    h("div", { class: "rung-order" },
      h("button", { type: "button", class: "rung-up", disabled: i === 0, "aria-label": `move rung ${i + 1} up`, onclick: () => move(-1) }, "↑"),
      h("button", { type: "button", class: "rung-down", disabled: i === rungs.length - 1, "aria-label": `move rung ${i + 1} down`, onclick: () => move(1) }, "↓")),
  ];
}

// The ladder's settings the board edits, each checked as the API checks it before it is sent:
// the gate (floor and threshold), runs per rung, auto top-up. `onsave(changes)` answers the
// ladder the API stored; the fields then show it and the note says so.
function ladderSettings(ladder, onsave) {
  const floor = h("select", { id: "gate-floor", "aria-label": "gate floor" },
    RATINGS.map((r) => h("option", { value: r, selected: r === ladder.gate.floor }, r)));
  const kind = h("select", { id: "gate-kind", "aria-label": "gate threshold kind" },
    h("option", { value: "count" }, "passing runs, at least"), h("option", { value: "fraction" }, "of the runs, at least"));
  const amount = h("input", { id: "gate-amount", type: "number", step: "any", min: 0, "aria-label": "gate threshold" });
  const perRung = h("input", { id: "runs-per-rung", type: "number", min: 1, max: 100, "aria-label": "runs per rung" });
  const auto = h("input", { id: "ladder-auto-top-up", type: "checkbox" });
  const note = fieldNote("ladder-settings");
  const show = (l) => {
    floor.value = l.gate.floor;
    kind.value = l.gate.threshold.kind;
    amount.value = l.gate.threshold.kind === "count" ? l.gate.threshold.runs : l.gate.threshold.of;
    perRung.value = l.runsPerCell;
    auto.checked = l.autoTopUp;
  };
  show(ladder);
  let stored = ladder;
  const refuse = (field, text) => { noteSaid(note, true, text); field.focus(); };
  const save = h("button", {
    type: "button",
    id: "ladder-settings-save",
    onclick: async () => {
      const n = Number(amount.value);
      if (kind.value === "count" && !(Number.isInteger(n) && n >= 1)) return refuse(amount, "gate.threshold.runs: at least 1 passing run");
      if (kind.value === "fraction" && !(amount.value !== "" && n > 0 && n <= 1)) return refuse(amount, "gate.threshold.of: a fraction greater than 0 and at most 1");
      const runs = Number(perRung.value);
      if (!(Number.isInteger(runs) && runs >= 1 && runs <= 100)) return refuse(perRung, "runsPerCell: a whole number from 1 to 100");
      const gate = { floor: floor.value, threshold: kind.value === "count" ? { kind: "count", runs: n } : { kind: "fraction", of: n } };
      const [saved, err] = await attempt(() => onsave({ gate, runsPerCell: runs, autoTopUp: auto.checked }));
      if (err) {
        show(stored);
        noteSaid(note, true, `refused: ${err.message}`);
        return;
      }
      stored = saved;
      show(saved);
      const t = saved.gate.threshold;
      noteSaid(note, false, `saved: gate ${saved.gate.floor} or better, ${t.kind === "count" ? `${t.runs} run(s)` : `${t.of} of the runs`}; ${saved.runsPerCell} runs per rung; auto top-up ${saved.autoTopUp ? "on" : "off"}`);
    },
  }, "Save");
  return h("fieldset", { id: "ladder-settings" }, h("legend", {}, "Gate and runs"),
    h("label", {}, "floor ", floor), " ", kind, " ", amount, " ",
    h("label", {}, "runs per rung ", perRung), " ",
    h("label", {}, auto, " auto top-up"), " ", save, " ", note);
}

// Halt all behind the same confirmation as a plan's: it also cancels in-flight jobs.
function haltAllDialog(what, onconfirm) {
  const dialog = h("dialog", { id: "halt-all-dialog" },
    h("p", {}, `Halt all cancels this ${what}'s queued and pending jobs and also its dispatched, starting and running ones, which are partly or wholly paid for.`),
    h("form", { method: "dialog" },
      h("button", { value: "cancel", id: "halt-all-cancel" }, "Keep them running"), " ",
      h("button", { value: "confirm", id: "halt-all-confirm", class: "danger" }, "Halt all")));
  dialog.addEventListener("close", () => {
    if (dialog.returnValue === "confirm") onconfirm();
  });
  return dialog;
}

// The ladder's actions: `before`, Top up now and Halt (each answer shown in `answerBox`, the
// board read again after it), then `after`.
function ladderControls(id, answerBox, redraw, before, after) {
  return h("div", { class: "controls" },
    before,
    h("button", {
      type: "button",
      id: "top-up-now",
      onclick: () => act(async () => {
        const a = await api("POST", `/v1/ladders/${id}/topup`, {});
        const answer = topUpAnswer(a);
        answer.append(h("p", { id: "recorded" }, `Verdicts written down: ${a.recorded}; queued runs an early stop cancelled: ${a.cancelled.length}.`));
        answerBox.replaceChildren(answer);
        await redraw();
      }),
    }, "Top up now"),
    h("button", {
      type: "button",
      id: "halt",
      onclick: () => act(async () => {
        const r = await api("POST", `/v1/ladders/${id}/halt`);
        answerBox.replaceChildren(h("div", { class: "answer", id: "halt-answer" }, `Halt cancelled ${r.cancelled} queued or pending jobs.`));
        await redraw();
      }),
    }, "Halt"),
    after);
}

async function ladderPage(id) {
  let [ladder, progress] = await Promise.all([
    api("GET", `/v1/ladders/${id}`),
    api("GET", `/v1/ladders/${id}/progress`),
  ]);
  const view = { filter: "", tallies: false };
  const boardBox = h("div", { id: "board-box" });
  const summary = h("span", { class: "muted", id: "board-summary" });
  const gateLine = h("span", { id: "gate-line" });
  const answerBox = h("div", { id: "answer-box" });
  const enable = h("button", {
    type: "button",
    id: "enable",
    onclick: () => act(async () => {
      await api("POST", `/v1/ladders/${id}/${progress.enabled ? "disable" : "enable"}`);
      await redraw();
    }),
  });
  const draw = () => {
    enable.textContent = progress.enabled ? "Stop spending on this climb" : "Start spending on this climb";
    document.body.dataset.enabled = progress.enabled ? "true" : "false";
    const t = ladder.gate.threshold;
    gateLine.textContent = `gate: ${ladder.gate.floor} or better, ${t.kind === "count" ? `${t.runs} run(s)` : `${t.of} of the runs`}` +
      ` · ${ladder.runsPerCell} runs per rung` + (ladder.earlyStop ? " · early stop" : "");
    summary.textContent = `${progress.enabled ? "on" : "off"} · buffer ${progress.buffered} of ${targetLabel(progress.bufferTarget)}; ${progress.toReview} to review; ${spendLabel(progress)}`;
    boardBox.replaceChildren(boardTable(ladder, progress, view, redraw));
  };
  // Anything in flight on the board: a rung's runs not completed yet.
  const boardInFlight = () => progress.climbers.some((c) => c.rungs.some((st) => !st.stale && st.tally && st.tally.pending > 0));
  const lastUpdated = liveLine();
  const read = async () => {
    [ladder, progress] = await Promise.all([
      api("GET", `/v1/ladders/${id}`),
      api("GET", `/v1/ladders/${id}/progress`),
    ]);
    draw();
    return boardInFlight();
  };
  const kick = startLive(lastUpdated, read);
  // Read the board again (after any control) and draw it; the answers shown stay.
  const redraw = async () => kick(await read());
  const put = async (changes) => {
    const saved = await api("PUT", `/v1/ladders/${id}`, ladderInput(ladder, changes));
    await redraw();
    return saved;
  };
  const axis = h("select", {
    id: "outer-axis",
    "aria-label": "outer axis",
    onchange: (e) => act(async () => { await put({ outerAxis: e.target.value }); }),
  }, Object.entries(AXIS_LABELS).map(([v, label]) => h("option", { value: v, selected: v === progress.outerAxis }, label)));
  const legend = h("p", { class: "muted", id: "statuses" }, Object.entries(STATUSES).map(([k, v], i) =>
    h("span", {}, i ? " · " : "", h("strong", {}, k), `: ${v}`)));
  const filter = h("select", {
    id: "board-filter",
    "aria-label": "show climbers",
    onchange: (e) => { view.filter = e.target.value; draw(); },
  }, h("option", { value: "" }, "every climber"),
  Object.entries(STATES).map(([k, [label]]) => h("option", { value: k }, label)));
  const tallies = h("input", { type: "checkbox", id: "show-tallies", onchange: (e) => { view.tallies = e.target.checked; boardBox.firstChild.classList.toggle("tallies", view.tallies); } });
  const dialog = haltAllDialog("ladder", () => act(async () => {
    const r = await api("POST", `/v1/ladders/${id}/halt-all`, { confirm: true });
    answerBox.replaceChildren(h("div", { class: "answer", id: "halt-answer" }, `Halt all cancelled ${r.cancelled} jobs; the ladder is off.`));
    await redraw();
  }));
  const controls = ladderControls(id, answerBox, redraw, [enable], [
    h("button", { type: "button", id: "halt-all", class: "danger", onclick: () => dialog.showModal() }, "Halt all…"),
    h("label", {}, "Order ", axis),
    summary]);
  const settings = h("div", { class: "controls" },
    ladderSettings(ladder, (changes) => put(changes)),
    targetEditor("ladder-target", "Buffer target of this ladder", ladder.bufferTarget, true, async (value) => (await put({ bufferTarget: value })).bufferTarget));
  draw();
  setMain(
    h("h1", {}, `Ladder ${ladder.name}`),
    workflowsLine(["its climb, top-ups and runs", `BelayLadderId = "${id}"`]),
    h("p", {}, link(`/ladders/${id}/queue`, "Review queue"), " · ", gateLine),
    controls, settings, dialog, legend, answerBox,
    h("p", { class: "filter" }, h("label", {}, "Show ", filter), " ", h("label", {}, tallies, " tallies")),
    lastUpdated, boardBox);
  kick(boardInFlight());
}

// ---- projects, Changes and Candidates ------------------------------------------------------

async function projectsPage() {
  const projects = await api("GET", "/v1/projects");
  setMain(
    h("h1", {}, "Projects"),
    projects.length === 0
      ? h("p", { class: "muted", id: "no-projects" }, "No projects yet.")
      : h("table", { id: "projects" },
        h("thead", {}, h("tr", {}, ["Project", "Status", "Generation"].map((t) => h("th", {}, t)))),
        h("tbody", {}, projects.map((p) => h("tr", {},
          h("td", {}, link(`/projects/${p.id}`, p.name)),
          h("td", {}, p.status),
          h("td", { class: "n" }, p.generation))))));
}

async function projectPage(id) {
  const [project, changes] = await Promise.all([
    api("GET", `/v1/projects/${id}`),
    api("GET", `/v1/projects/${id}/changes`),
  ]);
  setMain(
    h("h1", {}, `Project ${project.name}`),
    workflowsLine(["its workflows", `BelayProjectId = "${id}"`]),
    h("p", { id: "canonical" }, `canonical generation ${project.generation}`, project.canonicalCommit ? ` at ${project.canonicalCommit.slice(0, 12)}` : ""),
    h("h2", {}, "Changes"),
    changes.length === 0 ? h("p", { class: "muted" }, "No Changes yet.")
      : h("table", { id: "changes" },
        h("thead", {}, h("tr", {}, ["Change", "Status", "Risk tier"].map((t) => h("th", {}, t)))),
        h("tbody", {}, changes.map((c) => h("tr", {},
          h("td", {}, link(`/changes/${c.id}`, c.goal)),
          h("td", {}, c.status),
          h("td", {}, c.riskTier || ""))))));
}

// ---- words ------------------------------------------------------------------------------
// The Candidate, Change and approvals pages say what the API answered in words: an API enum
// (`awaiting_approval`, `checked_supported`) reads as words, a structured value as a list.

function words(code) {
  return String(code).replace(/_/g, " ");
}

// `criteriaMet`, `criteria_met` → "criteria met".
function keyWords(key) {
  return String(key).replace(/_/g, " ").replace(/([a-z0-9])([A-Z])/g, "$1 $2").toLowerCase();
}

// Any API value as words: a scalar as text, a list of scalars joined, an object as a list of
// "key: value" (nested values nested).
function wordsOf(v) {
  if (v === null || v === undefined) return "none";
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (typeof v !== "object") return String(v);
  if (Array.isArray(v)) {
    if (v.length === 0) return "none";
    if (v.every((x) => x === null || typeof x !== "object")) return v.map(wordsOf).join(", ");
    return h("ol", { class: "words" }, v.map((x) => h("li", {}, wordsOf(x))));
  }
  const entries = Object.entries(v);
  if (entries.length === 0) return "none";
  return h("ul", { class: "words" }, entries.map(([k, x]) => h("li", {}, h("span", { class: "key" }, keyWords(k)), ": ", wordsOf(x))));
}

const COVERAGE = {
  checked_supported: "checked, supported",
  checked_no_signal: "checked, no signal",
  not_checked: "not checked",
};

const RECEIPT_KINDS = {
  CANDIDATE_SELECTION: "Candidate selection",
  ACCEPTANCE_REPAIR: "Acceptance repair",
};

function policyStamp(p) {
  return p ? `${p.policyId || p.id || "policy"} version ${p.version}` : "none";
}

// Why a promotion is blocked, one sentence per block.
function blockLabel(b) {
  switch (b.code) {
    case "selection_pending": return "A sibling Candidate is still composing or verifying.";
    case "not_verified": return `The Candidate is ${words(b.status)}, not verified.`;
    case "stale": return b.reason;
    case "no_plan": return "The Candidate has no verification plan.";
    case "required_checks": return "Required checks are not satisfied: " +
      (b.gaps || []).map((g) => `${g.checkId} (${words(g.reason)})`).join(", ") + ".";
    case "approval_pending": return `It waits on a person: ${b.reason}`;
    case "approval_rejected": return "A person rejected it.";
    case "approval_for_another_tree": return "The approval was granted for another composed tree.";
    case "policy_changed": return `The plan was made under ${policyStamp(b.plan)}; ${policyStamp(b.active)} is active now.`;
    case "composed_commit_missing": return "The composed commit is not in the Candidate's fork.";
    default: return words(b.code);
  }
}

const OUTCOMES = {
  promoted: "promoted",
  alreadyPromoted: "already promoted",
  stale: "stale",
  blocked: "blocked",
};

// ---- changes and candidates ----------------------------------------------------------------

function candidateRow(k) {
  return h("tr", { dataset: { candidate: k.id } },
    h("td", {}, link(`/candidates/${k.id}`, k.id)),
    h("td", { class: "status" }, k.status),
    h("td", {}, k.statusReason || ""),
    h("td", { class: "n" }, k.baseGeneration),
    h("td", {}, k.changeSetIds.join(", ")));
}

async function changePage(id) {
  const [change, candidates, receipts] = await Promise.all([
    api("GET", `/v1/changes/${id}`),
    api("GET", `/v1/changes/${id}/candidates`),
    api("GET", `/v1/changes/${id}/receipts`),
  ]);
  setMain(
    h("h1", {}, `Change: ${change.goal}`),
    workflowsLine(["its verifications and promotions", `BelayChangeId = "${id}"`]),
    h("p", {}, link(`/projects/${change.projectId}`, "Project"), " · status ", h("strong", { id: "change-status" }, words(change.status)),
      ""),
    h("h2", {}, "Candidates"),
    candidates.length === 0 ? h("p", { class: "muted" }, "No Candidates yet.")
      : h("table", { id: "candidates" },
        h("thead", {}, h("tr", {}, ["Candidate", "Status", "Reason", "Base generation", "ChangeSets"].map((t) => h("th", {}, t)))),
        h("tbody", {}, candidates.map(candidateRow))),
    h("div", {},
      h("h2", {}, "Decision Receipts"),
      receipts.length === 0 ? h("p", { class: "muted" }, "No decisions recorded yet.")
        : h("ol", { id: "receipts" }, receipts.map((r) => h("li", { dataset: { kind: r.kind } },
          h("strong", {}, RECEIPT_KINDS[r.kind] || words(r.kind)), h("span", { class: "muted" }, ` (${r.kind})`),
          h("div", { class: "outcome" }, "Decided: ", wordsOf(r.outcome)),
          h("details", {}, h("summary", {}, "what it read"), wordsOf(r.inputs)))))));
}

// A gap is never green: only a `pass` with `checked_supported` coverage reads as satisfied.
function evidenceClass(e) {
  return e.status === "pass" && e.coverage === "checked_supported" ? "ok" : "gap";
}

// The commands a check ran and the tail of their output; open on a gap, folded on a pass.
async function outputView(k, e) {
  const out = await api("GET", `/v1/candidates/${k.id}/evidence/${e.id}/output`);
  return out.parts.map((p) => h("details", { class: "output", open: evidenceClass(e) === "gap", dataset: { part: p.label } },
    h("summary", {}, p.label === "output" ? "output" : p.label,
      p.command ? h("span", {}, " of ", h("code", {}, p.command)) : null,
      p.exitCode !== null && p.exitCode !== undefined ? ` · exit ${p.exitCode}` : "",
      p.timedOut ? " · timed out" : ""),
    h("pre", { class: "tail" }, p.tail || "(no output)")));
}

async function screenshotsView(k, e) {
  const figures = [];
  const shots = await api("GET", `/v1/candidates/${k.id}/evidence/${e.id}/screenshots`);
  for (const s of shots) {
    const resp = await fetch(s.url, { headers: { Authorization: "Bearer " + token() } });
    if (!resp.ok) throw new ApiError(resp.status, "screenshot", `screenshot ${s.index} answered ${resp.status}`);
    const u = URL.createObjectURL(await resp.blob());
    figures.push(h("figure", {}, h("img", { src: u, class: "screenshot", alt: `screenshot ${s.name}`, width: 320 }),
      h("figcaption", { class: "muted" }, `${s.name} · sha256 ${s.sha256.slice(0, 16)}…`)));
  }
  return figures.length ? h("div", { class: "screenshots" }, figures) : null;
}

async function evidenceRow(k, e) {
  const [output, shots] = await Promise.all([
    outputView(k, e),
    e.checkId === "browser" ? screenshotsView(k, e) : null,
  ]);
  const cls = evidenceClass(e);
  return h("tr", { class: `evidence ${cls}`, dataset: { check: e.checkId, status: e.status, coverage: e.coverage } },
    h("td", {}, e.checkId),
    h("td", {}, cls === "gap" ? h("span", { class: "tag gap" }, "gap") : h("span", { class: "tag ok" }, "satisfied"),
      ` ${e.status} × ${COVERAGE[e.coverage] || words(e.coverage)}`),
    h("td", {}, e.summary, output, shots),
    h("td", { class: "n" }, `${(e.durationMs / 1000).toFixed(1)} s`),
    h("td", { class: "n" }, e.attempt));
}

// The id of a file's section in the diff viewer, for links from the acceptance table.
function fileAnchor(path) {
  return "file-" + encodeURIComponent(path).replace(/%/g, "_");
}

function acceptanceView(k, diff) {
  if (!k.acceptance || k.acceptance.length === 0) return null;
  const shown = new Set(diff ? diff.files.map((f) => f.path) : []);
  return h("div", {}, h("h2", {}, "Acceptance"),
    h("table", { id: "acceptance" },
      h("thead", {}, h("tr", {}, ["Criterion", "Result", "Citation"].map((t) => h("th", {}, t)))),
      h("tbody", {}, k.acceptance.map((c) => h("tr", { class: c.result === "met" ? "ok" : "gap", dataset: { result: c.result } },
        h("td", {}, c.text, c.kept ? h("span", { class: "tag" }, " kept (from an earlier request)") : null),
        h("td", {}, words(c.result), c.citationRejected ? h("span", { class: "tag stale" }, " citation not valid") : null),
        h("td", {}, c.citation ? h("span", {},
          shown.has(c.citation.path) && !c.citationRejected
            ? h("a", { href: "#" + fileAnchor(c.citation.path), class: "cite" }, h("code", {}, c.citation.path))
            : h("code", {}, c.citation.path),
          ": “", c.citation.quote, "”") : (c.reason || "")))))));
}

const FILE_STATUS = { added: "added", modified: "modified", deleted: "deleted", renamed: "renamed" };

// The quote's own lines, without the diff markers a model may have copied and the indentation.
function quoteLines(quote) {
  return String(quote).split("\n").map((l) => l.replace(/^[+\- ]/, "").trim()).filter((l) => l.length > 0);
}

// A line's text with the quoted part marked: the part of a quote line found in it, or, when a
// quote spans lines with other whitespace, the line's text itself.
function citedText(text, quotes) {
  for (const q of quotes) {
    for (const part of quoteLines(q)) {
      const at = text.indexOf(part);
      if (at >= 0) return [text.slice(0, at), h("mark", { class: "quote" }, part), text.slice(at + part.length)];
    }
  }
  const lead = text.match(/^\s*/)[0];
  return [lead, h("mark", { class: "quote" }, text.slice(lead.length))];
}

const MARKER = { added: "+", removed: "−", context: " " };

function diffLine(l, f) {
  const cited = l.citedBy && l.citedBy.length > 0;
  const quotes = cited ? f.citations.filter((c) => l.citedBy.includes(c.criterionId)).map((c) => c.quote) : [];
  const title = cited ? "Cited for: " + f.citations.filter((c) => l.citedBy.includes(c.criterionId)).map((c) => c.criterion).join("; ") : null;
  return h("tr", { class: `line ${l.kind}` + (cited ? " cited" : ""), title, dataset: { old: l.oldLine ?? "", new: l.newLine ?? "" } },
    h("td", { class: "ln" }, l.oldLine ?? ""),
    h("td", { class: "ln" }, l.newLine ?? ""),
    h("td", { class: "mark" }, MARKER[l.kind]),
    h("td", { class: "code" }, cited ? citedText(l.text, quotes) : l.text));
}

// A hunk's side as words: "lines 10–16", "line 3", or "none" (a file added or deleted).
function linesLabel(start, n) {
  if (n === 0) return "none";
  return n === 1 ? `line ${start}` : `lines ${start}–${start + n - 1}`;
}

function fileView(f) {
  const cited = f.citations && f.citations.length > 0;
  const counts = f.additions !== null && f.additions !== undefined ? ` +${f.additions} −${f.deletions}` : "";
  const header = h("div", { class: "file-head" },
    h("span", { class: `tag ${f.status}` }, FILE_STATUS[f.status] || words(f.status)), " ",
    f.oldPath ? [h("code", {}, f.oldPath), " → "] : null, h("code", { class: "path" }, f.path),
    h("span", { class: "muted" }, counts),
    cited ? h("span", { class: "tag cited" }, "cited by the acceptance check") : null);
  const notes = [];
  if (f.binary) notes.push("Binary file: not shown line by line.");
  if (f.truncated) notes.push(f.hunks.length ? "Cut here: the rest of this file is past the size bound of the diff." : "Not shown: past the size bound of the diff.");
  if (!f.binary && !f.truncated && f.hunks.length === 0) notes.push(f.status === "renamed" ? "Moved without changes." : "No line changed (an empty file, or its mode only).");
  const unfound = (f.citations || []).filter((c) => !c.found);
  return h("section", { class: "file" + (cited ? " cited" : ""), id: fileAnchor(f.path), dataset: { path: f.path, status: f.status } },
    header,
    f.hunks.length ? h("table", { class: "hunks" }, f.hunks.map((hk) => h("tbody", { class: "hunk" },
      h("tr", { class: "hunk-head" }, h("td", { colspan: 4 }, `Before: ${linesLabel(hk.oldStart, hk.oldLines)} · after: ${linesLabel(hk.newStart, hk.newLines)}`)),
      hk.lines.map((l) => diffLine(l, f))))) : null,
    notes.map((n) => h("p", { class: "muted note" }, n)),
    unfound.length ? h("ul", { class: "unfound" }, unfound.map((c) => h("li", {},
      `Cited for “${c.criterion}” from code the patch does not change: `, h("mark", { class: "quote" }, c.quote)))) : null);
}

function diffView(diff, missing) {
  if (missing) return h("div", {}, h("h2", {}, "Patch"), h("p", { class: "muted", id: "diff-missing" }, missing));
  if (!diff) return null;
  const left = diff.files.filter((f) => f.truncated);
  return h("div", { id: "diff" },
    h("h2", {}, "Patch"),
    h("p", { class: "muted" }, `${diff.files.length} file${diff.files.length === 1 ? "" : "s"} changed from base ${diff.baseCommit.slice(0, 12)} to ${diff.composedCommit.slice(0, 12)}.`),
    diff.truncated ? h("p", { class: "notice", id: "diff-truncated" },
      `The patch is larger than one page shows (at most ${diff.limits.maxFiles} files and ${diff.limits.maxLines} lines). Left out, in part or whole: `,
      left.map((f, i) => [i ? ", " : "", h("code", {}, f.path)]), ".") : null,
    diff.files.length === 0 ? h("p", { class: "muted" }, "No file changed.") : diff.files.map(fileView));
}

const DECIDED_BY = {
  ranking: "ranking",
  judge: "the Integration Judge",
  person: "a person (no valid preference)",
  no_winner: "nobody: no Candidate can ship",
};

// How the sibling group was decided, and the ranking it read (best first).
function selectionView(k) {
  const s = k.selection;
  if (!s) return null;
  if (s.state === "claimed") {
    return h("div", {}, h("h2", {}, "Selection"), h("p", { id: "selection" }, `Being decided (claimed by ${s.claimed_by}).`));
  }
  const yesNo = (b) => (b ? "yes" : "no");
  return h("div", {}, h("h2", {}, "Selection"),
    h("p", { id: "selection", dataset: { winner: s.winner || "" } },
      s.winner ? ["Winner ", link(`/candidates/${s.winner}`, s.winner), s.winner === k.id ? " (this Candidate)" : ""] : "No winner",
      `, decided by ${DECIDED_BY[s.decidedBy] || s.decidedBy}`, s.reason ? `: ${s.reason}` : "", "."),
    h("table", { id: "ranking" },
      h("thead", {}, h("tr", {}, ["Rank", "Candidate", "Promotable", "Criteria met", "Gaps", "Optional failures", "Checks passed"].map((t) => h("th", {}, t)))),
      h("tbody", {}, s.ranking.map((r, i) => h("tr", { dataset: { candidate: r.id } },
        h("td", { class: "n" }, i + 1),
        h("td", {}, r.id === k.id ? h("strong", {}, r.id) : link(`/candidates/${r.id}`, r.id)),
        h("td", {}, yesNo(r.promotable)),
        h("td", { class: "n" }, `${r.criteriaMet} of ${r.criteriaTotal}`),
        h("td", { class: "n" }, r.gaps),
        h("td", { class: "n" }, r.optionalFailures),
        h("td", { class: "n" }, r.passingChecks))))));
}

const NO_GESTURE = {
  composing: "Nothing to decide yet: the Candidate is being composed.",
  verifying: "Nothing to decide yet: the Candidate is being verified.",
  verified: "Nothing to decide here: no approval waits on this composed tree.",
  rejected: "Nothing to decide: the Candidate was rejected, and nothing can ship it.",
  stale: "Nothing to decide: the Candidate is stale; a Candidate composed on the newer base replaces it.",
  promoted: "Nothing to decide: the Candidate was promoted.",
};

function promotionLabel(p) {
  return `Promotion: ${OUTCOMES[p.outcome] || words(p.outcome)}` + (p.generation !== undefined && p.generation !== null ? `; canonical is at generation ${p.generation}` : "") + ".";
}

// Only the gestures the API says apply in the Candidate's state; after one, the Candidate is read
// again and the gestures follow its new state.
function gestureControls(k, answerBox, onchange) {
  const g = new Set(k.gestures || []);
  const out = [];
  if (g.has("approve") || g.has("reject")) {
    const reason = h("textarea", { id: "approval-reason", rows: 2, cols: 60, "aria-label": "reason" });
    const decide = (d) => act(async () => {
      const body = { decision: d, tree: k.composedTree };
      if (reason.value.trim()) body.reason = reason.value.trim();
      const r = await api("POST", `/v1/candidates/${k.id}/approvals`, body);
      answerBox.replaceChildren(h("div", { class: "answer", id: "decision-answer" },
        `Recorded: ${words(r.approval.status)}.`, r.promotion ? ` ${promotionLabel(r.promotion)}` : ""));
      await onchange();
    });
    out.push(h("div", { class: "controls", id: "approval" },
      h("p", {}, "Approve or reject the exact composed tree ", h("code", { id: "composed-tree" }, k.composedTree), ", whose patch is above."),
      h("label", {}, "Reason ", reason),
      g.has("approve") ? h("button", { type: "button", id: "grant", onclick: () => decide("grant") }, "Approve") : null, " ",
      g.has("reject") ? h("button", { type: "button", id: "reject", class: "danger", onclick: () => decide("reject") }, "Reject") : null));
  }
  if (g.has("promote")) {
    out.push(h("div", { class: "controls" }, h("button", {
      type: "button",
      id: "promote",
      onclick: () => act(async () => {
        const r = await api("POST", `/v1/candidates/${k.id}/promote`);
        const blocks = r.blocks ? h("ul", { id: "blocks" }, r.blocks.map((b) =>
          h("li", { class: "gap", dataset: { block: b.code } }, blockLabel(b)))) : null;
        answerBox.replaceChildren(h("div", { class: "answer", id: "promote-answer" }, promotionLabel(r), blocks));
        await onchange();
      }),
    }, "Promote")));
  }
  if (out.length === 0) out.push(h("p", { class: "muted", id: "no-gestures" }, NO_GESTURE[k.status] || "Nothing to decide."));
  return out;
}

async function candidatePage(id) {
  const k = await api("GET", `/v1/candidates/${id}`);
  let promotability = null;
  let diff = null;
  let missing = null;
  const readDiff = async () => {
    if (!k.composedCommit) return;
    try {
      diff = await api("GET", `/v1/candidates/${id}/diff`);
    } catch (err) {
      if (!(err instanceof ApiError && (err.status === 410 || err.status === 409))) throw err;
      missing = `The patch cannot be shown: ${err.message}.`;
    }
  };
  const readPromotability = async () => {
    try {
      promotability = await api("GET", `/v1/candidates/${id}/promotability`);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404)) throw err;
    }
  };
  const [rows] = await Promise.all([Promise.all(k.evidence.map((e) => evidenceRow(k, e))), readDiff(), readPromotability()]);
  const answerBox = h("div", { id: "answer-box" });
  const gestures = h("div", { id: "gestures" });
  const status = h("strong", { id: "candidate-status" }, k.status);
  const show = (now) => {
    status.textContent = now.status;
    gestures.replaceChildren(...gestureControls(now, answerBox, async () => show(await api("GET", `/v1/candidates/${id}`))));
    gestures.dataset.gestures = (now.gestures || []).join(" ");
  };
  show(k);
  setMain(
    h("h1", {}, `Candidate ${k.id}`),
    workflowsLine(["its verification and promotion", `BelayCandidateId = "${k.id}"`]),
    h("p", {}, link(`/changes/${k.changeId}`, "Change"), " · status ", status,
      k.statusReason ? h("span", { id: "candidate-reason" }, ` — ${k.statusReason}`) : null),
    h("p", { class: "muted" }, `base generation ${k.baseGeneration} · composed ${k.composedCommit ? k.composedCommit.slice(0, 12) : "—"}`),
    acceptanceView(k, diff),
    diffView(diff, missing),
    h("h2", {}, "Evidence"),
    h("table", { id: "evidence" },
      h("thead", {}, h("tr", {}, ["Check", "Status × coverage", "Summary", "Duration", "Attempt"].map((t) => h("th", {}, t)))),
      h("tbody", {}, rows)),
    k.gaps.length ? h("div", {}, h("h2", {}, "Gaps"), h("ul", { id: "gaps" }, k.gaps.map((g) =>
      h("li", { class: "gap" }, `${g.checkId}: ${words(g.reason)}`)))) : null,
    selectionView(k),
    promotability ? h("div", {}, h("h2", {}, "Promotion preconditions"),
      h("table", { id: "preconditions" }, h("tbody", {}, promotability.preconditions.map((p) =>
        h("tr", { class: p.satisfied ? "ok" : "gap", dataset: { precondition: p.precondition } },
          h("td", {}, words(p.precondition)), h("td", {}, p.satisfied ? "satisfied" : "not satisfied"), h("td", {}, p.detail)))))) : null,
    h("h2", {}, "Decide"),
    gestures, answerBox);
  // An open output shows its last lines: that is where a failure says why.
  for (const pre of document.querySelectorAll("details.output[open] pre.tail")) pre.scrollTop = pre.scrollHeight;
}

async function approvalsPage() {
  const waiting = await api("GET", "/v1/approvals?status=requested");
  setMain(h("h1", {}, "Waiting on a person"),
    waiting.length === 0 ? h("p", { class: "muted", id: "no-approvals" }, "Nothing waits on a person.")
      : h("ul", { id: "approvals" }, waiting.map((a) => {
        const reason = h("input", { type: "text", size: 40, "aria-label": "why cancel", placeholder: "why cancel" });
        const out = h("span", {});
        const cancel = h("button", { onclick: () => act(async () => {
          const r = await api("POST", `/v1/changes/${a.changeId}/cancel`, { reason: reason.value });
          out.replaceChildren(`Change ${words(r.change.status)}.`);
        }) }, "Cancel the change");
        return h("li", { dataset: { approval: a.id } },
          a.candidateId ? link(`/candidates/${a.candidateId}`, a.candidateId) : link(`/changes/${a.changeId}`, a.changeId),
          `: ${a.reason}`, a.tree ? ` (tree ${a.tree.slice(0, 12)})` : "", " ", reason, cancel, out);
      })));
}

async function homePage() {
  navigate("/plans");
}

const ROUTES = [
  [/^\/$/, homePage],
  [/^\/sign-in$/, signInPage],
  [/^\/plans$/, plansPage],
  [/^\/plans\/([a-z0-9_]+)$/, planPage],
  [/^\/plans\/([a-z0-9_]+)\/queue$/, (id) => queuePage("plan", id)],
  [/^\/ladders$/, laddersPage],
  [/^\/ladders\/([a-z0-9_]+)$/, ladderPage],
  [/^\/ladders\/([a-z0-9_]+)\/queue$/, (id) => queuePage("ladder", id)],
  [/^\/projects$/, projectsPage],
  [/^\/projects\/([a-z0-9_]+)$/, projectPage],
  [/^\/changes\/([a-z0-9_]+)$/, changePage],
  [/^\/candidates\/([a-z0-9_]+)$/, candidatePage],
  [/^\/approvals$/, approvalsPage],
  [/^\/runs\/([a-z0-9_]+)$/, runPage],
];

// Marks when the rendered page has been painted: a frame callback runs just before the next
// paint, and a task queued from it runs just after. `belay bench console` reads the marks.
function markPainted(path, what = "painted") {
  requestAnimationFrame(() => setTimeout(() => performance.mark(`belay:${what} ${path}`), 0));
}

async function render() {
  showError(null);
  const path = location.pathname;
  if (!token() && path !== "/sign-in") {
    history.replaceState(null, "", "/sign-in");
    return render();
  }
  if (path === "/sign-in") showWho(null);
  else whoAmI();
  for (const [re, page] of ROUTES) {
    const m = path.match(re);
    if (m) {
      document.body.dataset.page = page.name;
      document.body.removeAttribute("data-ready");
      document.body.removeAttribute("data-complete");
      filling = [];
      pageKeys = null;
      matrixFilter = "";
      stopLive();
      const [, failed] = await attempt(() => page(...m.slice(1)));
      if (failed && location.pathname === path) {
        // The page could not load: say so in place of it (never over a page still loading).
        setMain(h("h1", {}, failed.status === 404 ? "Not found" : "This page could not load"),
          h("p", { id: "page-error" }, failed.message));
      }
      document.body.dataset.ready = path;
      markPainted(path);
      const rest = filling;
      filling = [];
      await Promise.all(rest);
      markPainted(path, "complete");
      if (document.body.dataset.ready === path) document.body.dataset.complete = path;
      return;
    }
  }
  setMain(h("h1", {}, "Not found"), h("p", {}, "The console has no page at ", path, "."));
  document.body.dataset.ready = path;
}

document.addEventListener("click", (e) => {
  const a = e.target.closest("a[data-nav]");
  if (!a || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
  e.preventDefault();
  navigate(a.getAttribute("href"));
});
window.addEventListener("popstate", render);
window.addEventListener("DOMContentLoaded", render);
