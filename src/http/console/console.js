// payorch support console: the support API (docs/guides/support.md, "Support") in a page. No framework and no
// build step. The support key lives in sessionStorage for this tab only, never in a URL.
"use strict";

const KEY = "payorch.supportKey";
const $ = (id) => document.getElementById(id);

function say(text, isError) {
  const status = $("status");
  status.textContent = text;
  status.classList.toggle("error", Boolean(isError));
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "class") node.className = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) {
      node.append(child instanceof Node ? child : String(child));
    }
  }
  return node;
}

async function api(method, path) {
  const key = sessionStorage.getItem(KEY);
  const response = await fetch(path, {
    method,
    headers: { Authorization: `Bearer ${key}` },
  });
  const body = await response.json().catch(() => ({}));
  // A read refused is a key that is not a support key; a write refused is a read-only
  // support key, which keeps reading (the message names the role the write needs).
  if (response.status === 401 || (response.status === 403 && method === "GET")) {
    forget();
    throw new Error(body.detail || "That key is not a support key; enter another.");
  }
  if (!response.ok) {
    throw new Error(body.detail || `The server answered ${response.status}.`);
  }
  return body;
}

function when(iso) {
  return iso ? new Date(iso).toISOString().replace("T", " ").replace("Z", " UTC") : "";
}

// Amounts are in minor units; the currency's own number of decimals says where the point goes.
function money(amount, currency) {
  try {
    const format = new Intl.NumberFormat("en", { style: "currency", currency: currency.toUpperCase() });
    const digits = format.resolvedOptions().maximumFractionDigits;
    return format.format(amount / 10 ** digits);
  } catch {
    return `${amount} ${currency} (minor units)`;
  }
}

// Why a payment or an operation failed, in words, its code beside: a provider's code alone
// ("2", Adyen's refusal) says nothing to support. A declined payment's class follows payorch's
// code (docs/guides/declines.md): whether another attempt with the card can succeed at all;
// then the provider's own code, which is what the provider's dashboard shows (none with
// payorch's own codes, which no provider named).
function failureText(failed) {
  if (!failed.failure_code) return "";
  const provider = failed.provider_failure_code ? `, provider ${failed.provider_failure_code}` : "";
  const code = failed.failure_class
    ? `${failed.failure_code}, ${failed.failure_class}${provider}`
    : failed.failure_code;
  return failed.failure_message ? `${failed.failure_message} (${code})` : code;
}

function statusBadge(status) {
  return el("span", { class: `status ${status}` }, status);
}

// A payment id that opens the payment's story.
function storyLink(id) {
  const link = el("a", { href: `#${id}` }, id);
  link.addEventListener("click", (event) => {
    event.preventDefault();
    showStory(id);
  });
  return link;
}

function paymentLink(payment) {
  const link = storyLink(payment.id);
  const amount = payment.currency ? ` ${money(payment.amount, payment.currency)} · ` : " ";
  return el("li", {}, link, " ", statusBadge(payment.status), amount, when(payment.created_at),
    payment.merchant_id ? " · " : null, payment.merchant_id ? merchantLabel(payment.merchant_id) : null);
}

// Merchants by name, as support knows them: every merchant's name by id, from the support
// API (every page; merchants are few). A merchant made since is asked for again when first
// met, at most every few seconds.
let merchantNames = new Map();
let merchantsAsked = 0;

async function loadMerchants() {
  merchantsAsked = Date.now();
  const names = new Map();
  let after = null;
  for (;;) {
    const params = new URLSearchParams({ limit: "100" });
    if (after) params.set("starting_after", after);
    const page = await api("GET", `/v1/support/merchants?${params}`);
    for (const m of page.data) names.set(m.id, m.name);
    if (!page.has_more || page.data.length === 0) break;
    after = page.data[page.data.length - 1].id;
  }
  merchantNames = names;
  document.querySelectorAll(".merchant[data-merchant]").forEach(nameMerchant);
}

function askMerchantsAgain() {
  if (Date.now() - merchantsAsked < 5000) return;
  loadMerchants().catch(() => {});
}

// A merchant's name, its id on hover; `beside` shows the id after the name too.
function merchantLabel(id, beside) {
  const label = el("span", { class: "merchant", "data-merchant": id, title: id });
  if (beside) label.dataset.beside = "true";
  nameMerchant(label);
  return label;
}

function nameMerchant(label) {
  const id = label.dataset.merchant;
  const name = merchantNames.get(id);
  if (!name) askMerchantsAgain();
  label.replaceChildren(name || el("code", {}, id),
    name && label.dataset.beside ? el("span", { class: "merchant-id" }, " (", el("code", {}, id), ")") : "");
}

// What the box holds decides the filter: ids carry their kind in their prefix. Other text
// may be any of three things the merchant or the payer knows, so it is looked up as each:
// an Idempotency-Key, the merchant's order reference, a part of the merchant's name.
function searches(query) {
  const q = encodeURIComponent(query);
  const by = (filter, label) => ({ path: `/v1/support/payments?${filter}=${q}`, label });
  if (query.startsWith("ord_")) return [by("order_id", "order id")];
  if (query.startsWith("mer_")) return [by("merchant_id", "merchant id")];
  if (query.startsWith("pi_")) return [by("provider_payment_id", "provider charge id")];
  return [by("idempotency_key", "Idempotency-Key"), by("merchant_reference", "order reference"),
    by("merchant_name", "merchant name")];
}

let lastSearch = null;

async function search(event) {
  event.preventDefault();
  const query = $("query").value.trim();
  if (!query) return;
  if (query.startsWith("pay_")) {
    $("results").hidden = true;
    lastSearch = null;
    return showStory(query);
  }
  // A refund opens the story of the payment it gives money back from, a dispute that of the
  // payment it takes money back from.
  const about = query.startsWith("re_") ? "refunds" : query.startsWith("dp_") ? "disputes" : null;
  if (about) {
    $("results").hidden = true;
    lastSearch = null;
    try {
      const found = await api("GET", `/v1/${about}/${encodeURIComponent(query)}`);
      return showStory(found.payment_id);
    } catch (err) {
      return say(err.message, true);
    }
  }
  say("Searching…");
  lastSearch = searches(query);
  await showResults(true);
}

// Every search's newest payments, merged newest first (ids are made in time order), each
// saying what it was found by.
async function showResults(openSingle) {
  // The search these answers are for: another may start while they are on their way, and
  // then they are dropped rather than shown under it.
  const searched = lastSearch;
  if (!searched) return;
  try {
    const pages = await Promise.all(searched.map((s) => api("GET", s.path)));
    if (lastSearch !== searched) return;
    const found = new Map();
    pages.forEach((page, i) => page.data.forEach((p) => {
      const entry = found.get(p.id) || { payment: p, by: [] };
      entry.by.push(searched[i].label);
      found.set(p.id, entry);
    }));
    const data = [...found.values()].sort((a, b) => (a.payment.id < b.payment.id ? 1 : -1));
    const hasMore = pages.some((page) => page.has_more);
    const list = $("result-list");
    list.replaceChildren(...data.map(({ payment, by }) => {
      const item = paymentLink(payment);
      if (searched.length > 1) item.append(el("span", { class: "found-by" }, ` · by ${by.join(", ")}`));
      return item;
    }));
    $("results").hidden = false;
    say(data.length === 0 ? "No payment matches." :
      `${data.length} payment(s) found${hasMore ? "; the newest are shown" : ""}.`);
    if (openSingle && data.length === 1) await showStory(data[0].payment.id);
  } catch (err) {
    if (lastSearch === searched) say(err.message, true);
  }
}

// One story, interleaved by time: transitions, provider calls and webhook events.
function storyLines(story) {
  const lines = [];
  for (const t of story.timeline) {
    lines.push({ at: t.at, kind: "transition",
      text: [t.from ? `${t.from} → ` : "", statusBadge(t.to), ` by ${t.source}`, t.detail ? ` (${t.detail})` : ""] });
  }
  for (const t of story.refund_timeline || []) {
    const refund = (story.refunds || []).find((r) => r.id === t.refund_id);
    const amount = refund ? ` ${money(refund.amount, refund.currency)}` : "";
    lines.push({ at: t.at, kind: "refund",
      text: [`${t.refund_id}${amount}: `, t.from ? `${t.from} → ` : "", statusBadge(t.to), ` by ${t.source}`,
        t.detail ? ` (${t.detail})` : ""] });
  }
  for (const c of story.provider_calls) {
    lines.push({ at: c.at, kind: "provider call",
      text: [`${c.operation} by ${c.source}: ${c.outcome}`, c.http_status ? `, HTTP ${c.http_status}` : ", no HTTP answer",
        `, ${c.latency_ms} ms`, c.detail ? ` (${c.detail})` : ""] });
  }
  for (const w of story.webhook_events) {
    lines.push({ at: w.received_at, kind: "webhook",
      text: [`${w.event_type}: ${w.outcome}`, w.detail ? ` (${w.detail})` : "",
        w.deliveries > 1 ? `; delivered ${w.deliveries} times, the later copies duplicates that changed nothing` : "",
        ` · ${w.provider_event_id}`] });
  }
  // At the same instant, the cause first: the call or the webhook, then the move it made.
  const rank = { "provider call": 0, webhook: 1, transition: 2, refund: 2 };
  lines.sort((a, b) => (new Date(a.at) - new Date(b.at)) || (rank[a.kind] - rank[b.kind]));
  return lines.map((line) => el("li", {}, el("span", { class: "when" }, when(line.at)),
    el("span", { class: "kind" }, line.kind), ...line.text));
}

/// What the payment's refunds gave back, and what is still on its way.
function refunded(story) {
  const refunds = story.refunds || [];
  if (refunds.length === 0) return "nothing";
  const sum = (status) => refunds.filter((r) => r.status === status).reduce((n, r) => n + r.amount, 0);
  const open = refunds.filter((r) => r.status === "created" || r.status === "pending")
    .reduce((n, r) => n + r.amount, 0);
  const currency = story.payment.currency;
  return `${money(sum("succeeded"), currency)} in ${refunds.length} refund(s)` +
    (open ? `, ${money(open, currency)} still pending` : "");
}

function summary(story) {
  const p = story.payment;
  const key = story.idempotency_key;
  const rows = [
    ["Payment", p.id], ["Status", statusBadge(p.status)],
    ["Amount", money(p.amount, p.currency)], ["Merchant", merchantLabel(p.merchant_id, true)],
    ["Order", story.order ? `${story.order.id} (${story.order.status})` : p.order_id],
    ["Provider charge", p.provider_payment_id || "none known yet"],
    ["Refunded", refunded(story)],
    ["Failure", failureText(p) || "none"],
    // A retry names the attempt of the same request it followed (docs/guides/declines.md,
    // "Retries"); the timeline's first line says why in words.
    ...(p.retry_of ? [["Retry of", el("span", {}, storyLink(p.retry_of), ` (${p.retry_reason})`)]] : []),
    ...(story.late_approval ? [["Late approval", lateText(story.late_approval)]] : []),
    ...((story.disputes || []).length ? [["Disputes", el("ul", {}, ...story.disputes.map(disputeItem))]] : []),
    ["Capture", holdText(story)],
    ["Idempotency-Key", story.idempotency_key_name
      ? `${story.idempotency_key_name} (${key ? key.state : "expired"})` : "none"],
    ["Next provider check", p.next_check_at ? when(p.next_check_at) : "none: final"],
    ["Created", when(p.created_at)],
  ];
  return rows.flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]);
}

// How the payment takes its money: at once, or a hold with its captures and voids.
function holdText(story) {
  const p = story.payment;
  const parts = [p.capture_method === "manual" ? "manual (a hold)" : "automatic"];
  if (p.status === "authorized" && p.authorized_until) parts.push(`held until ${when(p.authorized_until)}`);
  if (p.amount_captured != null) parts.push(`captured ${money(p.amount_captured, p.currency)}`);
  if (p.next_action) parts.push("waiting for the payer's 3-D Secure challenge");
  if (p.cancellation_reason) parts.push(`canceled: ${p.cancellation_reason}`);
  for (const o of story.hold_operations || []) {
    const amount = o.amount != null ? ` ${money(o.amount, o.currency)}` : "";
    parts.push(`${o.object}${amount} by ${o.source}: ${o.status}${o.failure_code ? ` (${failureText(o)})` : ""}`);
  }
  return parts.join("; ");
}

// A provider's approval of a payment payorch had failed, and what became of giving it back
// (docs/guides/declines.md, "Late approvals").
function lateText(l) {
  const undo = l.provider_undo_id ? ` (${l.provider_undo_id})` : "";
  return `${l.provider} said ${l.approved_as} ${money(l.amount, l.currency)} by ${l.source}: ` +
    `${l.status}${undo}${l.detail ? `; ${l.detail}` : ""}`;
}

// A payment's dispute as its story tells it (docs/guides/support.md, "Disputes"): each move
// and answer in one line, then what the merchant should do now.
function disputeItem(d) {
  return el("li", {}, `${d.dispute.id}: ${d.told}. `, el("em", {}, d.dispute.advice));
}

// A dispute in "What needs a human": money returned twice first, then an answer due.
function disputeLine(d) {
  const due = d.evidence_due_by ? `, answer by ${when(d.evidence_due_by)}` : "";
  const twice = d.overlap > 0 ? `, ${money(d.overlap, d.currency)} returned twice unless won` : "";
  return el("li", {}, `${d.id} ${money(d.amount, d.currency)} ${d.reason}: ${d.status}${due}${twice} on `,
    storyLink(d.payment_id));
}

// Whether support may release what the payment holds: a hold, or a challenge left waiting.
function voidable(p) {
  return p.status === "authorized" || (p.status === "pending" && !!p.next_action);
}

async function voidHold() {
  const button = $("void-hold");
  const id = $("reconcile").dataset.payment;
  if (!id || button.getAttribute("aria-busy") === "true") return;
  button.setAttribute("aria-busy", "true");
  $("void-result").textContent = "Asking the provider to release the hold…";
  try {
    const answer = await api("POST", `/v1/support/payments/${encodeURIComponent(id)}/void`);
    await showStory(id);
    $("void-result").textContent = answer.payment.status === "canceled"
      ? "Released: the payment is canceled and nothing was taken."
      : `The void is ${answer.operation.status}; payorch asks the provider again until it is done.`;
    replaceLatestRow(answer.payment);
  } catch (err) {
    // Refused (voided meanwhile from another tab, say): the story as it is now, then why.
    await showStory(id);
    $("void-result").textContent = err.message;
  } finally {
    button.removeAttribute("aria-busy");
  }
}

// The order's events, each with its deliveries, every send of them and a Redeliver button.
function eventItem(event) {
  const request = event.request
    ? `by request ${event.request.id} (key ${event.request.idempotency_key})`
    : "by a webhook, the reconciler or support";
  const result = el("span", { class: "redelivered", role: "status" });
  const button = el("button", { type: "button", "data-event": event.id }, "Redeliver");
  button.addEventListener("click", () => redeliver(event.id, button, result));
  const deliveries = event.deliveries.map((d) => el("li", { "data-endpoint": d.endpoint_id },
    "to ", el("code", {}, d.url), ` (${d.endpoint_id}): `, statusBadge(d.state),
    `, ${d.attempts} send(s)`, d.state === "pending" ? `, next ${when(d.next_attempt_at)}` : ""));
  const sends = event.delivery_attempts.map((a) => el("li", {},
    el("span", { class: "when" }, when(a.at)), `sent to ${a.endpoint_id}: `,
    a.http_status ? `HTTP ${a.http_status}` : "no HTTP answer", `, ${a.latency_ms} ms`,
    a.error ? ` (${a.error})` : ""));
  return el("li", { "data-event": event.id },
    el("span", { class: "when" }, when(event.created)), el("strong", {}, event.type), ` ${event.id} `,
    request, button, result,
    el("ul", {}, ...(deliveries.length ? deliveries : [el("li", {}, "no delivery: no endpoint was subscribed")])),
    sends.length ? el("ul", { class: "sends" }, ...sends) : null);
}

async function redeliver(id, button, result) {
  if (button.getAttribute("aria-busy") === "true") return;
  button.setAttribute("aria-busy", "true");
  result.textContent = "Asking…";
  try {
    const answer = await api("POST", `/v1/support/events/${encodeURIComponent(id)}/redeliver`);
    const pending = answer.deliveries.filter((d) => d.state === "pending").length;
    const story = $("reconcile").dataset.payment;
    if (story) await showStory(story);
    const shown = document.querySelector(`#events li[data-event="${CSS.escape(id)}"] .redelivered`);
    (shown || result).textContent =
      `Redelivered: ${pending} of ${answer.deliveries.length} delivery(ies) pending, due now.`;
  } catch (err) {
    result.textContent = err.message;
  } finally {
    button.removeAttribute("aria-busy");
  }
}

// What a support key did: who (the key's name and role), what, before → after. An action
// asked whose outcome was never recorded says so: it may have been done.
function supportActionItem(a) {
  const shown = (state) => (state == null ? "—" : Object.entries(state).map(([k, v]) => `${k} ${v}`).join(", "));
  const after = a.outcome === "unknown" ? "asked, outcome unknown" : shown(a.after);
  return el("li", {}, el("span", { class: "when" }, when(a.at)),
    el("span", { class: "kind" }, a.action.replaceAll("_", " ")),
    `${a.target_id} by ${a.key_name} (${a.role}): ${shown(a.before)} → ${after}`);
}

async function showStory(id) {
  say("Loading the payment…");
  try {
    const story = await api("GET", `/v1/support/payments/${encodeURIComponent(id)}`);
    $("story-title").textContent = `Payment ${story.payment.id}`;
    $("summary").replaceChildren(...summary(story));
    $("timeline").replaceChildren(...storyLines(story));
    $("others").replaceChildren(...(story.other_attempts.length
      ? story.other_attempts.map(paymentLink) : [el("li", {}, "none")]));
    $("events").replaceChildren(...((story.events || []).length
      ? story.events.map(eventItem) : [el("li", {}, "none yet")]));
    $("support-actions").replaceChildren(...((story.support_actions || []).length
      ? story.support_actions.map(supportActionItem) : [el("li", {}, "none")]));
    $("reconcile").dataset.payment = story.payment.id;
    // A new story starts clean: the answers shown belong to the payment they were about.
    $("reconcile-result").textContent = "";
    $("void-result").textContent = "";
    // The button alone: a void's answer stays readable once its payment is no hold.
    $("void-hold").hidden = !voidable(story.payment);
    $("void-hold").textContent = story.payment.status === "authorized"
      ? "Void the hold" : "Cancel the waiting challenge";
    $("story").hidden = false;
    say("");
    $("story-title").setAttribute("tabindex", "-1");
    $("story-title").focus();
  } catch (err) {
    say(err.message, true);
  }
}

async function reconcile() {
  const button = $("reconcile");
  const id = button.dataset.payment;
  if (!id || button.getAttribute("aria-busy") === "true") return;
  button.setAttribute("aria-busy", "true");
  $("reconcile-result").textContent = "Asking the provider…";
  try {
    const payment = await api("POST", `/v1/support/payments/${encodeURIComponent(id)}/reconcile`);
    await showStory(id);
    const now = { succeeded: "succeeded", failed: "failed", pending: "is still pending",
      created: "is still not confirmed" }[payment.status] || `is ${payment.status}`;
    $("reconcile-result").textContent = `Asked the provider: the payment ${now}.`;
    replaceLatestRow(payment);
    await Promise.all([showResults(false), loadAttention(), loadStats()]);
  } catch (err) {
    $("reconcile-result").textContent = err.message;
  } finally {
    button.removeAttribute("aria-busy");
  }
}

async function loadAttention() {
  const lists = $("attention-lists");
  try {
    const needs = await api("GET", "/v1/support/needs-a-human");
    const part = (title, items, render) => [
      el("h3", {}, `${title} (${items.length})`),
      el("ul", {}, ...(items.length ? items.map(render) : [el("li", {}, "none")])),
    ];
    lists.replaceChildren(
      ...part("Open past the alert age", needs.stuck, paymentLink),
      ...part("Failed: the provider had no record", needs.no_provider_record, paymentLink),
      ...part("Refunds open past the alert age", needs.stuck_refunds || [], (r) =>
        el("li", {}, when(r.created_at), ` ${r.id} ${money(r.amount, r.currency)} ${r.status} of `,
          paymentLink({ id: r.payment_id, status: "", amount: "", currency: "" }))),
      ...part("Webhooks that contradicted a payment", needs.webhook_conflicts, (c) =>
        el("li", {}, when(c.received_at), ` ${c.event_type} about `,
          c.payment_id ? paymentLink({ id: c.payment_id, status: "", amount: "", currency: "" }) : "no payment",
          c.detail ? ` (${c.detail})` : "")),
      ...part("Disputes to answer", needs.disputes || [], disputeLine),
      ...part("Settlement findings: the provider's books disagree", needs.settlement_findings || [], (f) =>
        el("li", {}, when(f.found_at), ` ${f.provider} ${f.kind.replaceAll("_", " ")} ${f.subject}`,
          f.expected != null || f.found != null
            ? `: expected ${f.expected ?? "nothing"}, booked ${f.found ?? "nothing"}${f.currency ? ` ${f.currency}` : ""}` : "",
          f.payment_id ? " on " : "", f.payment_id ? storyLink(f.payment_id) : null)),
      ...part("Late approvals: confirm each with the provider", needs.late_approvals || [], (l) =>
        el("li", {}, when(l.detected_at), " ",
          paymentLink({ id: l.payment_id, status: "", amount: "", currency: "" }), ` ${lateText(l)}`)),
      ...part("Disabled webhook endpoints", needs.disabled_webhook_endpoints || [], (e) =>
        el("li", {}, `${e.id} of `, merchantLabel(e.merchant_id), ": ", el("code", {}, e.url), ` (${e.disabled_reason || "disabled"}`,
          e.failing_since ? `; failing since ${when(e.failing_since)})` : ")")),
    );
  } catch (err) {
    lists.replaceChildren(el("p", {}, err.message));
  }
}

// The latest payments of every merchant, newest first, a page at a time: what the console
// opens on. The filters are the search API's own; "Older payments" asks for the page after
// the last row shown, so rows made meanwhile never shift the pages.
const PAGE = 20;
let latestCursor = null;
let latestGeneration = 0;

function latestPath(after) {
  const params = new URLSearchParams({ limit: String(PAGE) });
  const status = $("filter-status").value;
  const provider = $("filter-provider").value;
  if (status) params.set("status", status);
  if (provider) params.set("provider", provider);
  if (after) params.set("starting_after", after);
  return `/v1/support/payments?${params}`;
}

function latestRow(p) {
  const failure = p.failure_code ? el("span", { class: "failure" }, ` ${failureText(p)}`) : null;
  return el("tr", { "data-payment": p.id },
    el("td", { class: "when" }, when(p.created_at)),
    el("td", {}, storyLink(p.id)),
    el("td", {}, statusBadge(p.status), failure),
    el("td", { class: "amount" }, money(p.amount, p.currency)),
    el("td", {}, p.provider),
    el("td", {}, merchantLabel(p.merchant_id)));
}

function replaceLatestRow(payment) {
  const row = document.querySelector(`#latest-list tr[data-payment="${CSS.escape(payment.id)}"]`);
  if (row) row.replaceWith(latestRow(payment));
}

async function loadLatest(fromNewest) {
  // A later request (a filter changed meanwhile) wins over an earlier one still in flight.
  const generation = ++latestGeneration;
  const list = $("latest-list");
  const more = $("latest-more");
  more.setAttribute("aria-busy", "true");
  try {
    const page = await api("GET", latestPath(fromNewest ? null : latestCursor));
    if (generation !== latestGeneration) return;
    const rows = page.data.map(latestRow);
    if (fromNewest) list.replaceChildren(...rows); else list.append(...rows);
    if (page.data.length) latestCursor = page.data[page.data.length - 1].id;
    else if (fromNewest) latestCursor = null;
    more.hidden = !page.has_more;
    const shown = list.children.length;
    $("latest-status").textContent = shown === 0 ? "No payment matches these filters." :
      `${shown} payment(s) shown, newest first${page.has_more ? "; older ones follow" : ""}.`;
  } catch (err) {
    if (generation === latestGeneration) $("latest-status").textContent = err.message;
  } finally {
    more.removeAttribute("aria-busy");
  }
}

// Every status a payment can have, in the order the API documents them (`AttemptStatus` in
// its OpenAPI document): the status filter, the chart's stacks and its legend are made from
// this one list, so a status the API adds is never left out of them.
let statuses = [];

async function loadStatuses() {
  const response = await fetch("/openapi.json");
  const doc = await response.json().catch(() => ({}));
  const words = doc.components?.schemas?.AttemptStatus?.enum;
  if (!response.ok || !Array.isArray(words) || words.length === 0) {
    throw new Error("The API's document names no payment status; the filter and chart need them.");
  }
  statuses = words;
  const select = $("filter-status");
  const chosen = select.value;
  select.replaceChildren(el("option", { value: "" }, "any"),
    ...statuses.map((s) => el("option", { value: s }, s)));
  select.value = chosen;
  $("legend").replaceChildren(...statuses.map((s) => el("li", {}, el("span", { class: `swatch ${s}` }), s)));
}

// Asked for once per page: the filter and the chart wait for it.
let statusesLoaded = null;

function statusesReady() {
  statusesLoaded = statusesLoaded || loadStatuses().catch((err) => {
    statusesLoaded = null;
    throw err;
  });
  return statusesLoaded;
}

// The last hour by provider: one lane per provider, a column per minute stacked by status.
const SVG_NS = "http://www.w3.org/2000/svg";
let statsTimer = null;

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
  for (const child of children) node.append(child instanceof Node ? child : String(child));
  return node;
}

function clock(iso) {
  return new Date(iso).toISOString().slice(11, 16);
}

function per(seconds) {
  return seconds === 60 ? "a minute" : seconds % 3600 === 0 ? `per ${seconds / 3600} h` : `per ${seconds / 60} min`;
}

// Drawn at the width it is shown at, so its text keeps the page's size; redrawn on resize.
let shownStats = null;

function drawChart(stats) {
  shownStats = stats;
  const width = Math.max(240, Math.round($("chart").clientWidth || 720));
  const lane = 44;
  const gap = 22;
  const n = stats.buckets.length;
  const step = width / n;
  const height = stats.providers.length * (lane + gap) + 20;
  const chart = svg("svg", { id: "chart-svg", viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-labelledby": "chart-title", "aria-describedby": "chart-totals" });
  stats.providers.forEach((provider, row) => {
    const top = row * (lane + gap) + gap;
    const columns = stats.buckets.map((b) => b.counts.filter((c) => c.provider === provider));
    const peak = Math.max(1, ...columns.map((cs) => cs.reduce((sum, c) => sum + c.count, 0)));
    const series = svg("g", { class: "series", "data-provider": provider },
      svg("text", { x: 0, y: top - 7, class: "lane-label" },
        `${provider} · up to ${peak} ${per(stats.bucket_seconds)}`),
      svg("line", { x1: 0, x2: width, y1: top + lane, y2: top + lane, class: "axis" }));
    columns.forEach((counts, i) => {
      let y = top + lane;
      for (const status of statuses) {
        const count = counts.find((c) => c.status === status);
        if (!count) continue;
        // At least a pixel, so a single failure among many successes still shows.
        const h = Math.max(1, (count.count / peak) * lane);
        y -= h;
        const start = stats.buckets[i].start;
        series.append(svg("rect", { x: i * step + 0.5, y, width: Math.max(1, step - 1), height: h,
          class: status, "data-status": status, "data-count": count.count, "data-start": start },
        svg("title", {}, `${clock(start)} UTC, ${provider}: ${count.count} ${status}`)));
      }
    });
    chart.append(series);
  });
  chart.append(
    svg("text", { x: 0, y: height - 4, class: "tick" }, `${clock(stats.from)} UTC`),
    svg("text", { x: width, y: height - 4, class: "tick", "text-anchor": "end" }, "now"));
  $("chart").replaceChildren(chart);
}

// The same numbers as words, each provider with a button that lists its payments.
function drawTotals(stats) {
  $("chart-totals").replaceChildren(...stats.providers.map((provider) => {
    const mine = stats.totals.filter((t) => t.provider === provider);
    const all = mine.reduce((sum, t) => sum + t.count, 0);
    const failed = mine.filter((t) => t.status === "failed").reduce((sum, t) => sum + t.count, 0);
    const text = all === 0 ? "no payment" : mine.map((t) => `${t.count} ${t.status}`).join(", ") +
      (failed ? ` (${Math.round((100 * failed) / all)} % failed)` : "");
    const show = el("button", { type: "button", class: "link" }, `List ${provider}'s payments`);
    show.addEventListener("click", () => {
      $("filter-provider").value = provider;
      loadLatest(true);
      $("latest-title").scrollIntoView();
    });
    return el("li", { "data-provider": provider }, el("strong", {}, provider), `: ${text} `, show);
  }));
}

// The provider filter offers every provider the stats name, and keeps the one chosen.
function offerProviders(providers) {
  const select = $("filter-provider");
  const chosen = select.value;
  const names = [...new Set([...providers, ...(chosen ? [chosen] : [])])];
  select.replaceChildren(el("option", { value: "" }, "any"),
    ...names.map((name) => el("option", { value: name }, name)));
  select.value = chosen;
}

// Routing by success's scores, as the replica answering last read them from the database.
async function loadScores() {
  const list = $("scores-list");
  try {
    const answer = await api("GET", "/v1/support/routing/scores");
    const rows = answer.scores.map((s) => el("tr", { "data-provider": s.provider, "data-currency": s.currency },
      el("td", {}, s.provider), el("td", {}, s.currency.toUpperCase()),
      el("td", {}, s.rate === null ? "" : `${Math.round(100 * s.rate)} %`),
      el("td", {}, `${s.approved} of ${s.scored} (window ${answer.window})`),
      el("td", {}, s.eliminated_since ? when(s.eliminated_since) : "")));
    list.replaceChildren(...(rows.length ? rows
      : [el("tr", {}, el("td", { colspan: "5" }, "nothing scored in the last hour"))]));
  } catch (err) {
    list.replaceChildren(el("tr", {}, el("td", { colspan: "5" }, err.message)));
  }
}

async function loadStats() {
  try {
    const [stats] = await Promise.all([api("GET", "/v1/support/payments/stats?window=1h"), statusesReady()]);
    drawChart(stats);
    drawTotals(stats);
    offerProviders(stats.providers);
  } catch (err) {
    $("chart").replaceChildren(el("p", {}, err.message));
  }
}

function forget() {
  clearInterval(statsTimer);
  statsTimer = null;
  sessionStorage.removeItem(KEY);
  $("work").hidden = true;
  $("forget").hidden = true;
  $("key-form").hidden = false;
  $("key").focus();
}

function start() {
  $("key-form").hidden = true;
  $("forget").hidden = false;
  $("work").hidden = false;
  $("query").focus();
  loadMerchants().catch(() => {});
  loadStats();
  loadScores();
  loadLatest(true);
  loadAttention();
  clearInterval(statsTimer);
  statsTimer = setInterval(() => {
    if (!document.hidden) {
      loadStats();
      loadScores();
    }
  }, 60_000);
}

document.addEventListener("DOMContentLoaded", () => {
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY, $("key").value.trim());
    $("key").value = "";
    say("");
    start();
  });
  $("forget").addEventListener("click", forget);
  $("search-form").addEventListener("submit", search);
  $("reconcile").addEventListener("click", reconcile);
  $("void-hold").addEventListener("click", voidHold);
  $("latest-filters").addEventListener("submit", (event) => {
    event.preventDefault();
    loadLatest(true);
    loadStats();
  });
  $("filter-status").addEventListener("change", () => loadLatest(true));
  $("filter-provider").addEventListener("change", () => loadLatest(true));
  $("latest-more").addEventListener("click", () => loadLatest(false));
  let redraw = 0;
  window.addEventListener("resize", () => {
    cancelAnimationFrame(redraw);
    redraw = requestAnimationFrame(() => shownStats && drawChart(shownStats));
  });
  if (sessionStorage.getItem(KEY)) start(); else forget();
});
