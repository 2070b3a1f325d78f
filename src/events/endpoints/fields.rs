//! A new endpoint's fields as the request gave them, and what is made of them: every problem
//! at once, each named by its JSON pointer, as an order's are (docs/guides/events.md, "Webhook endpoints").

use std::collections::BTreeSet;

use super::{EnabledEvents, ALL_EVENTS};
use crate::events::safe_url::{check_registration, UrlPolicy};
use crate::events::EventType;
use crate::fields::text;
use crate::fields::{FieldProblems, MAX_DESCRIPTION_LEN};

/// Longest URL an endpoint may have (`webhook_endpoints.url`'s CHECK).
pub const MAX_URL_LEN: usize = 2048;

/// The fields of `POST /v1/webhook_endpoints`, read but not validated.
#[derive(Debug, Clone, Default)]
pub struct EndpointFields {
    pub url: Option<String>,
    pub enabled_events: Option<Vec<String>>,
    pub description: Option<String>,
}

/// An endpoint to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEndpoint {
    pub url: String,
    pub enabled_events: EnabledEvents,
    pub description: Option<String>,
}

impl EndpointFields {
    /// The endpoint to make, or every field problem at once.
    pub fn validate(&self, policy: UrlPolicy) -> Result<NewEndpoint, FieldProblems> {
        let mut problems = FieldProblems::new();
        let url = match self.url.as_deref() {
            None => {
                problems.push(("/url".into(), "is required".into()));
                None
            }
            Some(url) => match read_url(url, policy) {
                Ok(url) => Some(url),
                Err(why) => {
                    problems.push(("/url".into(), why));
                    None
                }
            },
        };
        let enabled_events = match &self.enabled_events {
            None => {
                problems.push(("/enabled_events".into(), events_wanted()));
                None
            }
            Some(listed) => read_events(listed, &mut problems),
        };
        let description = self.description.as_deref().map(text::nfc);
        if let Some(description) = &description {
            if description.chars().count() > MAX_DESCRIPTION_LEN {
                problems.push((
                    "/description".into(),
                    format!("must be at most {MAX_DESCRIPTION_LEN} characters"),
                ));
            } else if let Some(why) = text::unclear_text(description) {
                problems.push(("/description".into(), why.into()));
            }
        }
        match (url, enabled_events) {
            (Some(url), Some(enabled_events)) if problems.is_empty() => Ok(NewEndpoint {
                url,
                enabled_events,
                description,
            }),
            _ => Err(problems),
        }
    }
}

/// What `enabled_events` must be, in words that name every allowed value.
fn events_wanted() -> String {
    let known: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
    format!(
        "must list at least one event type of {}, or be [\"{ALL_EVENTS}\"] for every type",
        known.join(", ")
    )
}

/// The types `listed`, each once in [`EventType::ALL`]'s order, or `["*"]` alone; problems
/// go to `problems`.
fn read_events(listed: &[String], problems: &mut FieldProblems) -> Option<EnabledEvents> {
    if listed.is_empty() {
        problems.push(("/enabled_events".into(), events_wanted()));
        return None;
    }
    if listed.iter().any(|t| t == ALL_EVENTS) {
        if listed.iter().all(|t| t == ALL_EVENTS) {
            return Some(EnabledEvents::All);
        }
        problems.push((
            "/enabled_events".into(),
            format!("\"{ALL_EVENTS}\" already means every type: send [\"{ALL_EVENTS}\"] alone"),
        ));
        return None;
    }
    let mut types = BTreeSet::new();
    let mut unknown = false;
    for (at, listed) in listed.iter().enumerate() {
        match EventType::parse(listed) {
            Some(t) => {
                types.insert(EventType::ALL.iter().position(|known| *known == t));
            }
            None => {
                unknown = true;
                problems.push((
                    format!("/enabled_events/{at}"),
                    format!("unknown event type {listed:?}; {}", events_wanted()),
                ));
            }
        }
    }
    (!unknown).then(|| {
        EnabledEvents::Only(
            types
                .into_iter()
                .flatten()
                .map(|at| EventType::ALL[at])
                .collect(),
        )
    })
}

/// `url` as payorch will send to it (the URL policy's reading of it, `events::safe_url`),
/// or why it cannot be an endpoint's under `policy`.
fn read_url(url: &str, policy: UrlPolicy) -> Result<String, String> {
    let too_long = || format!("must be at most {MAX_URL_LEN} bytes");
    if url.len() > MAX_URL_LEN {
        return Err(too_long());
    }
    let parsed = check_registration(url, &policy).map_err(|refused| refused.to_string())?;
    // Written out, a URL may grow (percent-encoding): the column holds what is sent to.
    if parsed.as_str().len() > MAX_URL_LEN {
        return Err(too_long());
    }
    Ok(parsed.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(url: &str, events: &[&str]) -> EndpointFields {
        EndpointFields {
            url: Some(url.into()),
            enabled_events: Some(events.iter().map(|e| (*e).to_owned()).collect()),
            description: None,
        }
    }

    #[test]
    fn event_types_are_kept_once_each_in_their_own_order() {
        let made = fields(
            "https://shop.example/hook",
            &["order.paid", "payment.failed", "order.paid"],
        )
        .validate(UrlPolicy::default())
        .expect("valid");
        assert_eq!(
            made.enabled_events,
            EnabledEvents::Only(vec![EventType::PaymentFailed, EventType::OrderPaid])
        );
        let every = fields("https://shop.example/hook", &["*", "*"])
            .validate(UrlPolicy::default())
            .expect("valid");
        assert_eq!(every.enabled_events, EnabledEvents::All);
    }

    #[test]
    fn every_problem_is_named_at_once() {
        let problems = fields("http://shop.example/hook", &["payment.lost", "order.gone"])
            .validate(UrlPolicy::default())
            .unwrap_err();
        let named: Vec<&str> = problems.iter().map(|(field, _)| field.as_str()).collect();
        assert_eq!(named, ["/url", "/enabled_events/0", "/enabled_events/1"]);
    }

    #[test]
    fn the_url_is_kept_as_it_is_sent_to() {
        let made = fields("HTTPS://Shop.Example/hook", &["*"])
            .validate(UrlPolicy::default())
            .expect("valid");
        assert_eq!(made.url, "https://shop.example/hook");
    }
}
