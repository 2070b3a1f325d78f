// The payorch checkout page: every client-side rule of docs/guides/checkout.md "The checkout page".
//
// One intent = paying one order once. Its Idempotency-Key is made when the form opens and kept
// in localStorage with the intent until the payment reaches a final status, so a retry, a
// double click, a reload or a second tab all send the same key and the server charges at most
// once. Only a final status (succeeded, or failed with nothing taken) ends an intent; only then
// may a new one, with a new key, begin.
//
// Every request has a deadline: on a half-open connection (a phone between networks) an
// answer may never come, and a request given up on is sent again under the same key, so
// giving up costs nothing.
//
// A card whose bank asks the payer to confirm (3-D Secure) sends the payer away to the bank's
// page and back: the intent, its key and its payment stay in localStorage meanwhile, so the
// page that comes back (or a reload, or another tab) follows the same payment, and the bank's
// check it offers again is that payment's own, never a new one.
"use strict";

// A payment request: longer than the server's own bound on a provider call (10 s by default,
// docs/operations/configuration.md, "Configuration reference"), so a slow provider's answer
// is waited for, not cut off.
const PAY_DEADLINE_MS = 15000;
// Every other request (a status poll, loading or making the order): database work only.
const QUICK_DEADLINE_MS = 8000;
const RETRIES = 3; // resends after a network failure, a deadline or a 5xx before "Checking status…"
const FIRST_DELAY_MS = 400;
const LONGEST_DELAY_MS = 5000;
const ORDER_KEY = "payorch.checkout.order"; // the order this browser is paying
const NEW_ORDER_KEY = "payorch.checkout.new-order-key"; // the key of an order being made
const intentKey = (orderId) => `payorch.checkout.intent.${orderId}`;
// The address says the payer is back from the bank's check (docs/guides/three-d-secure.md, "3-D Secure").
const RETURNING = new URLSearchParams(window.location.search).has("returning");

const $ = (id) => document.getElementById(id);
const form = $("pay-form");
const fields = $("pay-fields");
const button = $("pay");
let order = null;
// "loading" → "ready" → "paying" → ("checking") → "paid" | back to "ready" after a decline;
// "redirecting" while the page leaves for the bank's check.
let phase = "loading";

function setPhase(next) {
  phase = next;
  document.body.dataset.phase = next;
}

function say(text, kind = "") {
  const status = $("status");
  status.textContent = text;
  status.className = kind;
}

// ---- the intent, kept across reloads and shared by tabs ---------------------------------

function readIntent() {
  try {
    return JSON.parse(localStorage.getItem(intentKey(order.id))) || null;
  } catch {
    return null;
  }
}

function writeIntent(intent) {
  localStorage.setItem(intentKey(order.id), JSON.stringify(intent));
}

/// The intent this form pays, made with its key when the form opens.
function currentIntent() {
  let intent = readIntent();
  if (!intent || !intent.key) {
    intent = { key: crypto.randomUUID(), payment_method: null, submitted: false };
    writeIntent(intent);
  }
  return intent;
}

/// A final status ends the intent: the next one gets a new key.
function endIntent() {
  localStorage.removeItem(intentKey(order.id));
}

// ---- talking to the server ---------------------------------------------------------------

// The waits between tries, cut short by `resumeNow`.
const sleepers = new Set();

function sleep(ms) {
  return new Promise((done) => {
    const wake = () => {
      clearTimeout(timer);
      sleepers.delete(wake);
      done();
    };
    const timer = setTimeout(wake, ms);
    sleepers.add(wake);
  });
}

/// Sends whatever is waiting to be sent again now, not at the end of its backoff: the network
/// or the payer is back (`online`, the page visible again or restored by the back button).
function resumeNow() {
  for (const wake of [...sleepers]) wake();
}

/// Exponential backoff with jitter, so clients that failed together do not retry together.
function backoff(round, retryAfterSecs) {
  const exp = Math.min(LONGEST_DELAY_MS, FIRST_DELAY_MS * 2 ** round);
  const jittered = exp / 2 + Math.random() * (exp / 2);
  return Math.max(jittered, (retryAfterSecs || 0) * 1000);
}

/// One request, given up (it throws, as a network failure does) when no whole answer has
/// come within `deadline` ms.
async function call(method, path, { key, body, deadline }) {
  const headers = { Accept: "application/json" };
  if (key) headers["Idempotency-Key"] = key;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), deadline);
  try {
    const response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      signal: controller.signal,
    });
    // A body cut off (or past the deadline) throws here: the answer was lost, so the request
    // is sent again. Only a whole body that is not JSON (a proxy's error page) reads as null.
    const text = await response.text();
    let json = null;
    try {
      json = JSON.parse(text);
    } catch {
      json = null;
    }
    return { status: response.status, json, retryAfter: Number(response.headers.get("Retry-After")) };
  } finally {
    clearTimeout(timer);
  }
}

const transient = (answer) =>
  !answer ||
  answer.status >= 500 ||
  answer.status === 429 ||
  (answer.status === 409 && answer.json && answer.json.code === "idempotency_key_in_use");

/// Sends one keyed request until it has a definite answer: the same key every time, so
/// however often it goes out, it happens once. A network failure, a request past its
/// `deadline` or a 5xx is retried `RETRIES` times with backoff; after that, and while the first
/// request is still running (`409 idempotency_key_in_use`), the page says "Checking status…"
/// and keeps asking with the same key, more slowly: the answer it gets is the first request's,
/// never a second charge.
async function sendUntilAnswered(path, key, body, deadline, onChecking) {
  let failures = 0;
  for (let round = 0; ; round += 1) {
    let answer = null;
    try {
      answer = await call("POST", path, { key, body, deadline });
    } catch {
      answer = null;
    }
    if (!transient(answer)) return answer;
    const failed = !answer || answer.status >= 500;
    if (failed) failures += 1;
    if (failed && failures <= RETRIES) {
      say(`Connection problem. Trying again with the same payment key (${failures} of ${RETRIES})…`);
    } else {
      onChecking();
    }
    await sleep(backoff(round, answer && answer.retryAfter));
  }
}

/// A GET that survives a flaky network: retried with backoff until it answers.
async function read(path) {
  for (let round = 0; ; round += 1) {
    try {
      const answer = await call("GET", path, { deadline: QUICK_DEADLINE_MS });
      if (answer.status < 500) return answer;
    } catch {
      // retried below
    }
    await sleep(backoff(round));
  }
}

// ---- what the payer sees -------------------------------------------------------------------

const money = (amount, currency) =>
  new Intl.NumberFormat(undefined, { style: "currency", currency: currency.toUpperCase() })
    .format(amount / 100);

function methodName(token) {
  const input = form.querySelector(`input[value="${CSS.escape(token || "")}"]`);
  if (!input) return token || "";
  const label = input.closest("label");
  const hint = label.querySelector(".hint");
  return label.textContent.replace(hint ? hint.textContent : "", "").trim();
}

function showOrder() {
  $("order-description").textContent = order.description || "Demo order";
  $("order-total").textContent = money(order.amount, order.currency);
  $("order-id").textContent = order.id;
}

/// The form locked while a payment is under way. Keyboard focus moves to the status, which
/// says what happens, rather than being lost with the disabled button; once only, so a payer
/// who moves it elsewhere while the page checks keeps it there.
function lock() {
  if (button.getAttribute("aria-busy") === "true") return;
  fields.disabled = true;
  button.disabled = true;
  button.setAttribute("aria-busy", "true");
  button.textContent = "Processing…";
  // An empty status is not shown, and what is not shown cannot take focus.
  if (!$("status").textContent) say("Processing…");
  $("status").focus();
}

/// Focus back on the form for the next try: the chosen card, where the keyboard chooses another.
function focusForm() {
  (form.querySelector("input:checked") || form.querySelector("input") || button).focus();
}

/// Only after a final status that took nothing: the payer may try again, as a new intent.
function unlock() {
  fields.disabled = false;
  button.disabled = false;
  button.removeAttribute("aria-busy");
  button.textContent = `Pay ${money(order.amount, order.currency)}`;
  form.hidden = false;
  $("waiting").hidden = true;
  $("challenge").hidden = true;
  setPhase("ready");
}

function checking(paymentId) {
  if (phase === "paid") return;
  setPhase("checking");
  lock();
  say("Checking status…");
  // Focus that fell back to the page itself (its element redrawn or hidden meanwhile) goes
  // to the status again; focus the payer put somewhere stays there.
  if (!document.activeElement || document.activeElement === document.body) $("status").focus();
  $("waiting").hidden = false;
  if (paymentId) $("waiting-payment").textContent = paymentId;
}

function showReceipt(payment) {
  setPhase("paid");
  endIntent();
  form.hidden = true;
  $("waiting").hidden = true;
  $("challenge").hidden = true;
  $("receipt-order").textContent = order.id;
  $("receipt-amount").textContent = money(payment.amount, payment.currency);
  $("receipt-payment").textContent = payment.id;
  $("receipt-method").textContent = methodName(payment.payment_method);
  $("receipt").hidden = false;
  $("new-order").hidden = false;
  say("Payment succeeded.", "success");
  $("receipt-title").focus();
}

/// A final status that took nothing: a decline, or a bank's check failed (`failed`) or left
/// unfinished until payorch canceled it (`canceled`).
const tookNothing = (payment) => payment.status === "failed" || payment.status === "canceled";

function showDeclined(payment) {
  const intent = readIntent();
  const afterBankCheck = payment.status === "canceled" || Boolean(intent && intent.challenge_url);
  endIntent();
  currentIntent();
  unlock();
  if (afterBankCheck) {
    const why = "Authentication failed or was abandoned — you were not charged.";
    say(`${why} Choose a card and try again.`, "error");
  } else {
    const reason = (payment.failure_message || payment.failure_code || "the card was declined")
      .replace(/[.\s]+$/, "");
    say(`Declined: ${reason}. Nothing was charged. Choose another card and try again.`, "error");
  }
  focusForm();
}

/// The bank's page a payment asks the payer to go to: only an http(s) address, whatever an
/// answer holds.
function challengeUrl(payment) {
  try {
    const url = new URL(payment.next_action && payment.next_action.url);
    return url.protocol === "https:" || url.protocol === "http:" ? url.href : null;
  } catch {
    return null;
  }
}

/// While a payment waits for its bank's check: the way back to that same check, for a payer
/// who left it unfinished.
function offerChallenge(payment) {
  const url = payment.status === "pending" ? challengeUrl(payment) : null;
  $("challenge").hidden = !url;
  if (url) $("challenge-link").href = url;
}

/// The bank asks the payer to confirm the payment. The first time (or when the payer pressed
/// Pay here) the page goes there itself, having noted it in the intent; afterwards (back from
/// the bank, a reload, another tab) it waits for the outcome and offers the same check again,
/// so that the back button never bounces the payer to the bank.
function followChallenge(payment, followNow) {
  const url = challengeUrl(payment);
  const intent = readIntent();
  const sentBefore = Boolean(intent && intent.challenge_url);
  if (intent) writeIntent({ ...intent, payment_id: payment.id, challenge_url: url });
  if (url && (followNow || !sentBefore)) {
    setPhase("redirecting");
    say("Taking you to your bank to confirm the payment…");
    window.location.assign(url);
    return;
  }
  return watchPayment(payment.id);
}

/// A request refused before anything was charged (a bad field, a canceled order).
function showRefusal(answer) {
  const problem = answer.json || {};
  endIntent();
  if (problem.code === "order_not_payable" || problem.code === "not_found") {
    setPhase("closed");
    form.hidden = true;
    $("waiting").hidden = true;
    say(`${problem.detail || "This order cannot be paid."} Start a new order.`, "error");
    $("new-order").hidden = false;
    return;
  }
  currentIntent();
  unlock();
  const named = (problem.errors || []).map((e) => `${e.field} ${e.message}`).join("; ");
  const why = named || problem.detail || `the payment was refused (${answer.status})`;
  say(`Not paid: ${why}. Nothing was charged.`, "error");
  focusForm();
}

// ---- paying ---------------------------------------------------------------------------------

/// Polls a payment whose outcome is not known yet until it is final.
async function watchPayment(paymentId) {
  checking(paymentId);
  for (let round = 0; ; round += 1) {
    const answer = await read(`/checkout/demo/payments/${encodeURIComponent(paymentId)}`);
    const payment = answer.json;
    if (answer.status === 200 && payment) {
      if (payment.status === "succeeded") return showReceipt(payment);
      if (tookNothing(payment)) return showDeclined(payment);
      offerChallenge(payment);
    }
    await sleep(backoff(round + 1));
  }
}

/// What a definite answer to the payment request means for the payer. `followNow`: the payer
/// pressed Pay in this window, so a bank's check is theirs to go to at once.
async function handle(answer, followNow) {
  const body = answer.json || {};
  if (answer.status === 200 || answer.status === 201) {
    const intent = readIntent();
    if (intent) writeIntent({ ...intent, payment_id: body.id });
    if (body.status === "succeeded") return showReceipt(body);
    if (tookNothing(body)) return showDeclined(body);
    if (body.status === "pending" && challengeUrl(body)) return followChallenge(body, followNow);
    return watchPayment(body.id);
  }
  if (answer.status === 409 && body.payment_id) {
    // Another attempt on this order is running, or already paid it: follow that one.
    if (body.code === "order_already_paid") {
      const paid = await read(`/checkout/demo/payments/${encodeURIComponent(body.payment_id)}`);
      if (paid.status === 200) return showReceipt(paid.json);
    }
    return watchPayment(body.payment_id);
  }
  return showRefusal(answer);
}

/// Sends the intent (again): the first send, a resume after a reload, or another tab's.
async function payIntent(intent, why = "Processing…", followNow = false) {
  const chosen = form.querySelector(`input[value="${CSS.escape(intent.payment_method || "")}"]`);
  if (chosen) chosen.checked = true; // the card this intent pays with, whoever chose it
  form.hidden = false;
  lock();
  setPhase("paying");
  say(why);
  const path = `/checkout/demo/orders/${encodeURIComponent(order.id)}/payments`;
  // The same body on every send of the intent, or the key would refuse it as another request.
  // Only the card: the server sets where the bank's check sends the payer back (this page).
  const body = { payment_method: intent.payment_method };
  const answer = await sendUntilAnswered(
    path, intent.key, body, PAY_DEADLINE_MS, () => checking(intent.payment_id),
  );
  await handle(answer, followNow);
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  // The first submit, by click, double click or Enter, locks the form; later ones do nothing.
  if (phase !== "ready") return;
  const chosen = new FormData(form).get("payment_method"); // read before the lock disables it
  setPhase("paying");
  lock();
  let intent = currentIntent();
  // Another tab may have sent this intent already: send the same request, not a new one.
  if (!intent.submitted) {
    intent = { ...intent, payment_method: chosen, submitted: true };
    writeIntent(intent);
  }
  payIntent(intent, "Processing…", true);
});

// A second tab on the same order learns at once that this one is paying it.
window.addEventListener("storage", (event) => {
  if (!order || event.key !== intentKey(order.id) || phase !== "ready") return;
  const intent = readIntent();
  if (intent && intent.submitted) {
    setPhase("paying");
    payIntent(intent, "This order is being paid in another window. Processing…");
  }
});

$("new-order").addEventListener("click", () => {
  localStorage.removeItem(ORDER_KEY);
  window.location.assign("/checkout");
});

// ---- opening the page ------------------------------------------------------------------------

/// The order to pay: the one in the address, the one this browser was paying, or a new one
/// made under a key kept until it exists (so a reload while it is made makes no second one).
async function openOrder() {
  const named = new URLSearchParams(window.location.search).get("order");
  let id = named || localStorage.getItem(ORDER_KEY);
  if (!id) {
    let key = localStorage.getItem(NEW_ORDER_KEY);
    if (!key) {
      key = crypto.randomUUID();
      localStorage.setItem(NEW_ORDER_KEY, key);
    }
    const made = await sendUntilAnswered("/checkout/demo/orders", key, {}, QUICK_DEADLINE_MS, () =>
      say("Checking status…"));
    if (made.status !== 201 && made.status !== 200) return made;
    localStorage.removeItem(NEW_ORDER_KEY);
    id = made.json.id;
  }
  localStorage.setItem(ORDER_KEY, id);
  // The address names the order and nothing else, so a reload is not taken for a return.
  const address = `/checkout?order=${encodeURIComponent(id)}`;
  if (window.location.pathname + window.location.search !== address) {
    window.history.replaceState(null, "", address);
  }
  return read(`/checkout/demo/orders/${encodeURIComponent(id)}`);
}

async function start() {
  say("Loading your order…");
  show(await openOrder());
}

/// The page for `answer`, the order as the server has it now: its receipt, the payment still
/// under way, the form, or why it cannot be paid here.
function show(answer) {
  if (answer.status !== 200) {
    const problem = answer.json || {};
    localStorage.removeItem(ORDER_KEY);
    setPhase("closed");
    form.hidden = true;
    say(problem.detail || `The order could not be loaded (${answer.status}).`, "error");
    $("new-order").hidden = problem.code === "demo_checkout_off";
    return;
  }
  order = answer.json;
  showOrder();
  const payments = order.payments || [];
  const paid = payments.find((p) => p.status === "succeeded");
  if (order.status === "paid" && paid) return showReceipt(paid);
  if (order.status === "canceled") {
    return showRefusal({ status: 409, json: { code: "order_not_payable", detail: "This order was canceled." } });
  }
  const intent = currentIntent();
  // Resumed after a reload, back from the bank, or in a second window: the same request under
  // the same key.
  if (intent.submitted) {
    const why = RETURNING
      ? "Back from your bank. Checking your payment…"
      : "Resuming your payment. Processing…";
    return payIntent(intent, why);
  }
  const open = payments.find((p) => p.status === "created" || p.status === "pending");
  if (open) return watchPayment(open.id); // paid from elsewhere, still running
  unlock();
  say("");
}

/// The back (or forward) button brought back the page as it was left, from the browser's
/// memory; the order may have been paid since, e.g. on a later visit to this page. A form is
/// asked about again before it may pay, and so is a page left for the bank's check; work under
/// way goes on at once.
async function restored() {
  if (phase === "redirecting") {
    setPhase("loading");
    return show(await read(`/checkout/demo/orders/${encodeURIComponent(order.id)}`));
  }
  if (phase !== "ready") return resumeNow();
  setPhase("loading");
  fields.disabled = true;
  button.disabled = true;
  show(await read(`/checkout/demo/orders/${encodeURIComponent(order.id)}`));
}

window.addEventListener("pageshow", (event) => {
  if (event.persisted) restored();
});
window.addEventListener("online", resumeNow);
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible") resumeNow();
});

start();
