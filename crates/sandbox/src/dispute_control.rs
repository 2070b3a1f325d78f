//! What makes the sandbox's disputes (`disputes`) happen, and the telling of each move
//! (`dispute_news`) through the face the payment was made with (docs/guides/test-cards.md,
//! "Disputes"):
//!
//! - a test payment method (`dispute_scripts`): Stripe's own `pm_card_createDispute…` and the
//!   sandbox's `pm_sandbox_dispute_…`, whose charge succeeds and is then disputed, each step
//!   `--dispute-after-ms` after the one before;
//! - `--dispute-rate`: that share of the other successful charges opens a chargeback
//!   `--dispute-after-ms` after it succeeded, drawn from `--mix-seed` and the payment's
//!   reference alone, so a run replays;
//! - the knob `POST /__sandbox/disputes` (`{"payment": …, "action": …}`): any move now;
//!   `GET /__sandbox/disputes` lists every dispute with its moves and its money;
//! - the merchant's evidence (`stripe_disputes`, `adyen_disputes`): the text
//!   `winning_evidence` wins and `losing_evidence` loses `--dispute-after-ms` later, as
//!   Stripe's test mode decides; any other evidence stays under review.

use std::collections::BTreeMap;
use std::sync::Arc;

use actix_web::web;
use actix_web::{HttpRequest, HttpResponse};
use chrono::Utc;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use super::adyen::MERCHANT_ACCOUNT;
use super::answers::refuse_unauthorized;
use super::dispute_news::{adyen_notification, stripe_dispute, stripe_events};
use super::dispute_scripts::script;
use super::disputes::{Change, DisputeEntry, Disputed, Move, Opening};
use super::protocol::protocol_of;
use super::store::Lookup;
use super::webhooks::Cause;
use super::{random_id, Sandbox};
use payorch_wire::stripe::PaymentIntent;

/// The evidence text that wins a dispute, and the one that loses it, as in Stripe's test mode.
pub const WINNING_EVIDENCE: &str = "winning_evidence";
pub const LOSING_EVIDENCE: &str = "losing_evidence";

/// Moves to make later, each after `--dispute-after-ms`.
pub(crate) struct Plan {
    /// The payment to open a dispute on (the first move opens), or the dispute to move.
    target: Target,
    opening: Opening,
    moves: Vec<Move>,
}

enum Target {
    Payment(String),
    Dispute(String),
}

/// The sender of the plans, held by the sandbox; [`run_plans`] carries them out.
pub(crate) type Plans = mpsc::UnboundedSender<Plan>;

/// Carries out each plan on its own task, until shutdown.
pub(crate) async fn run_plans(sb: Arc<Sandbox>, mut plans: mpsc::UnboundedReceiver<Plan>) {
    while let Some(plan) = plans.recv().await {
        let sb_task = sb.clone();
        sb.spawn(async move {
            let mut target = plan.target;
            for the_move in plan.moves {
                tokio::time::sleep(sb_task.config.dispute_after()).await;
                let done = match &target {
                    Target::Payment(payment) => {
                        sb_task.open_dispute(payment, the_move, &plan.opening)
                    }
                    Target::Dispute(id) => sb_task.move_dispute(id, the_move, BTreeMap::new()),
                };
                match done {
                    Ok(dispute) => target = Target::Dispute(dispute.id),
                    Err(why) => {
                        tracing::info!(%why, "sandbox dispute plan stopped");
                        return;
                    }
                }
            }
        });
    }
}

impl Sandbox {
    /// A charge of `intent` succeeded: disputed later if its payment method says so, or at
    /// `--dispute-rate`.
    pub(crate) fn after_charged(&self, intent: &PaymentIntent) {
        if self.disputes.was_disputed(&intent.id) {
            return;
        }
        let token = intent.payment_method.as_deref().unwrap_or_default();
        let (reason, moves) = match script(token) {
            Some(script) => (script.reason, script.moves.to_vec()),
            None if self.drawn_for_dispute(intent) => ("fraudulent", vec![Move::Open]),
            None => return,
        };
        let _ = self.dispute_plans.send(Plan {
            target: Target::Payment(intent.id.clone()),
            opening: Opening {
                amount: None,
                reason: Some(reason.to_owned()),
            },
            moves,
        });
    }

    /// Whether `--dispute-rate` picks `intent`: drawn from the seed and payorch's reference
    /// of the payment (its id when it has none).
    fn drawn_for_dispute(&self, intent: &PaymentIntent) -> bool {
        let rate = self.config.dispute_rate;
        if rate <= 0.0 {
            return false;
        }
        let reference = intent.metadata.get("attempt_id").unwrap_or(&intent.id);
        let mut hash = Sha256::new();
        hash.update(self.config.mix_seed.to_le_bytes());
        hash.update(b"dispute");
        hash.update(reference.as_bytes());
        let digest = hash.finalize();
        let mut first = [0; 8];
        first.copy_from_slice(&digest[..8]);
        let uniform = (u64::from_le_bytes(first) >> 11) as f64 / (1u64 << 53) as f64;
        uniform < rate
    }

    /// Opens a dispute on payment `payment` (a succeeded charge) and tells it.
    pub(crate) fn open_dispute(
        &self,
        payment: &str,
        the_move: Move,
        opening: &Opening,
    ) -> Result<DisputeEntry, String> {
        let intent = match self.store.get(payment) {
            Lookup::Found(intent) => intent,
            Lookup::Forgotten => return Err(format!("the sandbox no longer keeps {payment}")),
            Lookup::Missing => return Err(format!("no payment {payment}")),
        };
        if intent.status != "succeeded" {
            return Err(format!(
                "{payment} is {}: only a charge that took money is disputed",
                intent.status
            ));
        }
        let disputed = Disputed {
            protocol: protocol_of(&intent.metadata).to_owned(),
            charge: intent
                .latest_charge
                .clone()
                .unwrap_or_else(|| random_id("ch")),
            attempt_id: intent.metadata.get("attempt_id").cloned(),
            merchant_account: intent.metadata.get(MERCHANT_ACCOUNT).cloned(),
            received: intent.amount_received,
            currency: intent.currency.clone(),
            payment_intent: intent.id,
        };
        let change = self.disputes.open(
            &disputed,
            the_move,
            opening,
            random_id("du"),
            Utc::now().timestamp(),
        )?;
        self.tell(&change, None);
        Ok(change.dispute)
    }

    /// Moves dispute `id` and tells it; a submit with the winning or losing evidence is
    /// decided `--dispute-after-ms` later.
    pub(crate) fn move_dispute(
        &self,
        id: &str,
        the_move: Move,
        evidence: BTreeMap<String, String>,
    ) -> Result<DisputeEntry, String> {
        self.move_dispute_caused(id, the_move, evidence, None)
    }

    /// [`Sandbox::move_dispute`] caused by the merchant's API request `cause`.
    pub(crate) fn move_dispute_caused(
        &self,
        id: &str,
        the_move: Move,
        evidence: BTreeMap<String, String>,
        cause: Option<Cause>,
    ) -> Result<DisputeEntry, String> {
        let change = self
            .disputes
            .apply(id, the_move, evidence, Utc::now().timestamp())?;
        self.tell(&change, cause);
        if the_move == Move::Submit {
            self.decide_later(&change.dispute);
        }
        Ok(change.dispute)
    }

    /// The decision the evidence asks for, `--dispute-after-ms` from now: an inquiry the
    /// losing evidence does not close is escalated.
    fn decide_later(&self, dispute: &DisputeEntry) {
        let says = |text: &str| dispute.evidence.values().any(|v| v == text);
        let decision = if says(WINNING_EVIDENCE) {
            Move::Win
        } else if says(LOSING_EVIDENCE) {
            if super::disputes::is_warning(dispute.status) {
                Move::Escalate
            } else {
                Move::Lose
            }
        } else {
            return;
        };
        let _ = self.dispute_plans.send(Plan {
            target: Target::Dispute(dispute.id.clone()),
            opening: Opening::default(),
            moves: vec![decision],
        });
    }

    /// Tells a move through the face of its payment.
    fn tell(&self, change: &Change, cause: Option<Cause>) {
        if change.dispute.is_adyen() {
            if let Some(body) = adyen_notification(&self.config, change) {
                self.notifications.send(body);
            }
            return;
        }
        let object = stripe_dispute(&change.dispute);
        for kind in stripe_events(change) {
            self.webhooks.emit_object(kind, &object, cause.clone());
        }
    }
}

pub(super) fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/__sandbox/disputes", web::get().to(list))
        .route("/__sandbox/disputes", web::post().to(knob));
}

/// `POST /__sandbox/disputes`: a move now.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KnobRequest {
    /// The payment (Stripe `pi_…`, Adyen's `pspReference`): a move other than an opening
    /// moves its latest dispute.
    #[serde(default)]
    payment: Option<String>,
    /// The dispute, for a move other than an opening.
    #[serde(default)]
    dispute: Option<String>,
    action: String,
    #[serde(default)]
    amount: Option<i64>,
    #[serde(default)]
    reason: Option<String>,
}

async fn knob(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    body: web::Json<serde_json::Value>,
) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    let request: KnobRequest = match serde_json::from_value(body.into_inner()) {
        Ok(request) => request,
        Err(e) => return bad_request(e.to_string()),
    };
    let Some(the_move) = Move::from_word(&request.action) else {
        let words: Vec<&str> = Move::WORDS.iter().map(|(w, _)| *w).collect();
        return bad_request(format!(
            "no action {:?}: one of {}",
            request.action,
            words.join(", ")
        ));
    };
    let done = if the_move.opens() {
        let Some(payment) = request.payment.as_deref() else {
            return bad_request("an opening names its `payment`".into());
        };
        let opening = Opening {
            amount: request.amount,
            reason: request.reason,
        };
        sb.open_dispute(payment, the_move, &opening)
    } else {
        let id = match (&request.dispute, &request.payment) {
            (Some(id), _) => id.clone(),
            (None, Some(payment)) => match sb.disputes.of_payment(payment).pop() {
                Some(latest) => latest.id,
                None => return bad_request(format!("{payment} has no dispute")),
            },
            (None, None) => return bad_request("name the `dispute` or its `payment`".into()),
        };
        sb.move_dispute(&id, the_move, BTreeMap::new())
    };
    match done {
        Ok(dispute) => HttpResponse::Ok().json(dispute),
        Err(why) => bad_request(why),
    }
}

/// `GET /__sandbox/disputes`: every dispute kept, oldest first, or `?payment=`'s.
async fn list(sb: web::Data<Sandbox>, req: HttpRequest) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    #[derive(Deserialize)]
    struct Query {
        payment: Option<String>,
    }
    let query = web::Query::<Query>::from_query(req.query_string())
        .map(web::Query::into_inner)
        .unwrap_or(Query { payment: None });
    let data = match query.payment {
        Some(payment) => sb.disputes.of_payment(&payment),
        None => sb.disputes.all(),
    };
    HttpResponse::Ok().json(json!({"object": "list", "data": data}))
}

fn bad_request(why: String) -> HttpResponse {
    HttpResponse::BadRequest().json(json!({ "error": why }))
}
