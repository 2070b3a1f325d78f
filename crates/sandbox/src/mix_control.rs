//! Each face's mix (`mix`) while the sandbox runs, and `GET`/`POST /__sandbox/mix/{face}`
//! that read and change it, so a run can drop one provider's approval rate mid-way and
//! raise it again (docs/guides/test-cards.md, "Approval rates and outages").
//!
//! What the two outages no fault token had before answer: `refused`, the face's own `403`
//! before anything is done; `dropped`, the connection closed with no answer after the
//! charge was made and recorded.

use std::pin::Pin;
use std::task::{Context, Poll};

use actix_web::body::{BodySize, MessageBody};
use actix_web::http::StatusCode;
use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde_json::json;

use super::answers::refuse_unauthorized;
use super::behaviour::Behaviour;
use super::mix::{Face, Mix};
use super::{Sandbox, SandboxConfig};

/// The mixes of both faces.
pub(crate) struct Mixes {
    stripe: Mix,
    adyen: Mix,
}

impl Mixes {
    pub(crate) fn from_config(config: &SandboxConfig) -> Self {
        Self {
            stripe: config.stripe_mix.clone(),
            adyen: config.adyen_mix.clone(),
        }
    }

    fn of(&mut self, face: Face) -> &mut Mix {
        match face {
            Face::Stripe => &mut self.stripe,
            Face::Adyen => &mut self.adyen,
        }
    }
}

impl Sandbox {
    pub(crate) fn mix(&self, face: Face) -> Mix {
        self.lock_mixes().of(face).clone()
    }

    pub(crate) fn set_mix(&self, face: Face, mix: Mix) {
        *self.lock_mixes().of(face) = mix;
    }

    fn lock_mixes(&self) -> std::sync::MutexGuard<'_, Mixes> {
        self.mixes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What a charge of `behaviour` through `face` does under the face's mix, drawn from the
    /// seed and the request's `Idempotency-Key`.
    pub(crate) fn mixed(&self, face: Face, req: &HttpRequest, behaviour: Behaviour) -> Behaviour {
        let key = req
            .headers()
            .get("Idempotency-Key")
            .and_then(|v| v.to_str().ok());
        self.lock_mixes()
            .of(face)
            .behaviour(self.config.mix_seed, key, behaviour)
    }
}

pub(super) fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/__sandbox/mix/{face}", web::get().to(read))
        .route("/__sandbox/mix/{face}", web::post().to(change));
}

/// The face's mix in its written form.
async fn read(sb: web::Data<Sandbox>, req: HttpRequest, face: web::Path<String>) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    match Face::from_word(&face) {
        Some(face) => answer(face, &sb.mix(face)),
        None => no_such_face(&face),
    }
}

/// The body, in the written form, changes the parts it names; the rest stay.
async fn change(
    sb: web::Data<Sandbox>,
    req: HttpRequest,
    face: web::Path<String>,
    body: Bytes,
) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(&sb, &req) {
        return refused;
    }
    let Some(face) = Face::from_word(&face) else {
        return no_such_face(&face);
    };
    let written = String::from_utf8_lossy(&body);
    match sb.mix(face).with(&written) {
        Ok(mix) => {
            tracing::info!(face = face.word(), %mix, "sandbox mix changed");
            sb.set_mix(face, mix.clone());
            answer(face, &mix)
        }
        Err(e) => HttpResponse::BadRequest().json(json!({ "error": e })),
    }
}

fn answer(face: Face, mix: &Mix) -> HttpResponse {
    HttpResponse::Ok().json(json!({ "face": face.word(), "mix": mix.to_string() }))
}

fn no_such_face(face: &str) -> HttpResponse {
    HttpResponse::NotFound().json(json!({
        "error": format!("no face {face:?}: stripe or adyen")
    }))
}

/// `refused` under `key` (begun, so a key answered before got its answer): the key is let go,
/// as a provider records nothing of a request it refused.
pub(super) fn refused_keyed(
    sb: &Sandbox,
    key: Option<&str>,
    refused: fn() -> HttpResponse,
) -> HttpResponse {
    if let Some(key) = key {
        sb.store.abandon(key);
    }
    refused()
}

/// `refused` through the Stripe face: Stripe's `403` for a request it would not process.
pub(super) fn refused_stripe() -> HttpResponse {
    HttpResponse::build(StatusCode::FORBIDDEN).json(json!({
        "error": {
            "type": "invalid_request_error",
            "message": "The provided key does not have access to this resource right now; \
                        the request was not processed.",
        }
    }))
}

/// `dropped`: a head promising a body that never comes, so the client reads the connection
/// closing mid-answer (or before any), as when a provider's connection drops after it took
/// the request.
pub(super) fn dropped() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(Dropped)
}

struct Dropped;

impl MessageBody for Dropped {
    type Error = std::io::Error;

    fn size(&self) -> BodySize {
        BodySize::Sized(512)
    }

    fn poll_next(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        Poll::Ready(Some(Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "sandbox: the connection dropped after the charge",
        ))))
    }
}
