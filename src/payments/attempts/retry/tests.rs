use super::*;
use crate::providers::decline::{Advice, DeclineCode};

fn declined(code: DeclineCode) -> Decline {
    Decline::new(code, "raw", Advice::default())
}

/// A soft decline at the first of two providers, the switch on, nothing else in the way.
fn soft() -> Facts<'static> {
    Facts {
        decline: declined(DeclineCode::GenericDecline),
        settings: RetrySettings {
            soft_declines: true,
            ..RetrySettings::default()
        },
        attempts: 1,
        three_d_secure_tried: false,
        stepped_up: false,
        payer_present: false,
        next_provider: Some("second"),
    }
}

fn authentication() -> Facts<'static> {
    Facts {
        decline: declined(DeclineCode::AuthenticationRequired),
        payer_present: true,
        ..soft()
    }
}

fn none() -> CardDeclines {
    CardDeclines::default()
}

#[test]
fn a_soft_decline_moves_to_the_next_provider() {
    assert_eq!(soft().decline.class, FailureClass::Soft);
    assert_eq!(
        decide(&soft(), none()),
        Ok(Retry::Elsewhere { provider: "second" })
    );
    assert_eq!(
        Retry::Elsewhere { provider: "x" }.reason(),
        RetryReason::SoftDecline
    );
}

#[test]
fn a_soft_decline_stays_when_the_switch_is_off() {
    let facts = Facts {
        settings: RetrySettings::default(),
        ..soft()
    };
    assert_eq!(decide(&facts, none()), Err(NoRetry::SwitchOff));
}

#[test]
fn a_soft_decline_at_the_last_provider_stays() {
    let facts = Facts {
        next_provider: None,
        ..soft()
    };
    assert_eq!(decide(&facts, none()), Err(NoRetry::NoNextProvider));
}

#[test]
fn a_hard_decline_never_retries() {
    for code in [
        DeclineCode::LostOrStolenCard,
        DeclineCode::InvalidNumber,
        DeclineCode::InsufficientFunds,
    ] {
        let facts = Facts {
            decline: declined(code),
            ..soft()
        };
        assert_eq!(decide(&facts, none()), Err(NoRetry::Hard), "{code:?}");
    }
}

#[test]
fn a_network_never_again_advice_never_retries() {
    // Made hard by the advice already; the advice is a reason of its own all the same.
    let advice = Advice {
        network_advice_code: Some("03".into()),
        ..Advice::default()
    };
    let facts = Facts {
        decline: Decline::new(DeclineCode::GenericDecline, "05", advice),
        ..soft()
    };
    assert_eq!(decide(&facts, none()), Err(NoRetry::NetworkAdvice));
    // Even were the class soft (a decline built by hand): the advice alone refuses.
    let mut decline = facts.decline.clone();
    decline.class = FailureClass::Soft;
    let facts = Facts { decline, ..soft() };
    assert_eq!(decide(&facts, none()), Err(NoRetry::NetworkAdvice));
}

#[test]
fn an_unknown_class_never_retries() {
    let mut decline = declined(DeclineCode::GenericDecline);
    decline.class = FailureClass::Unknown;
    let facts = Facts { decline, ..soft() };
    assert_eq!(decide(&facts, none()), Err(NoRetry::OtherClass));
}

#[test]
fn only_a_failed_answer_with_a_decline_is_definite() {
    let failed = |decline| ProviderOutcome::Failed {
        code: "generic_decline".into(),
        message: "no".into(),
        provider_id: None,
        decline,
    };
    let decline = declined(DeclineCode::GenericDecline);
    assert_eq!(
        Facts::decline_of(&failed(Some(decline.clone()))),
        Some(&decline)
    );
    assert_eq!(Facts::decline_of(&failed(None)), None);
    for outcome in [
        ProviderOutcome::Unknown {
            reason: "timeout".into(),
        },
        ProviderOutcome::Pending { provider_id: None },
        ProviderOutcome::Unavailable {
            reason: "refused".into(),
        },
        ProviderOutcome::NotFound,
        ProviderOutcome::Succeeded {
            provider_id: "pi_1".into(),
        },
    ] {
        assert_eq!(Facts::decline_of(&outcome), None, "{outcome:?}");
    }
}

#[test]
fn max_attempts_ends_the_chain() {
    let facts = Facts {
        attempts: 2,
        ..soft()
    };
    assert_eq!(decide(&facts, none()), Err(NoRetry::MaxAttempts));
    let facts = Facts {
        settings: RetrySettings {
            max_attempts: 3,
            ..facts.settings
        },
        ..facts
    };
    assert!(decide(&facts, none()).is_ok());
    // One attempt allowed: never a retry, of either kind.
    let one = RetrySettings {
        max_attempts: 1,
        ..soft().settings
    };
    for facts in [soft(), authentication()] {
        let facts = Facts {
            settings: one,
            ..facts
        };
        assert_eq!(decide(&facts, none()), Err(NoRetry::MaxAttempts));
    }
    // A stored value past the most allowed is held to it.
    let facts = Facts {
        attempts: MOST_ATTEMPTS,
        settings: RetrySettings {
            max_attempts: 9,
            ..soft().settings
        },
        ..soft()
    };
    assert_eq!(decide(&facts, none()), Err(NoRetry::MaxAttempts));
}

#[test]
fn the_card_cap_refuses_at_ten_a_day_or_fifteen_a_month() {
    let cap = |last_day, last_30_days| CardDeclines {
        last_day,
        last_30_days,
    };
    assert!(decide(&soft(), cap(9, 14)).is_ok());
    assert_eq!(decide(&soft(), cap(10, 10)), Err(NoRetry::CardCap));
    assert_eq!(decide(&soft(), cap(1, 15)), Err(NoRetry::CardCap));
    assert_eq!(
        decide(&authentication(), cap(10, 10)),
        Err(NoRetry::CardCap)
    );
}

#[test]
fn no_retry_elsewhere_after_three_d_secure_unless_allowed() {
    let facts = Facts {
        three_d_secure_tried: true,
        ..soft()
    };
    assert_eq!(decide(&facts, none()), Err(NoRetry::AfterThreeDSecure));
    let facts = Facts {
        settings: RetrySettings {
            after_three_d_secure: true,
            ..facts.settings
        },
        ..facts
    };
    assert_eq!(
        decide(&facts, none()),
        Ok(Retry::Elsewhere { provider: "second" })
    );
    assert!(asked_for_three_d_secure(ThreeDSecure::Required, false));
    assert!(asked_for_three_d_secure(ThreeDSecure::Automatic, true));
    assert!(!asked_for_three_d_secure(ThreeDSecure::Automatic, false));
}

#[test]
fn a_decline_asking_for_authentication_steps_up_at_the_same_provider() {
    assert_eq!(decide(&authentication(), none()), Ok(Retry::StepUp));
    assert_eq!(Retry::StepUp.reason(), RetryReason::AuthenticationRequired);
    // The switch is for other providers; a step-up stays at this one.
    let facts = Facts {
        settings: RetrySettings::default(),
        next_provider: None,
        ..authentication()
    };
    assert_eq!(decide(&facts, none()), Ok(Retry::StepUp));
}

#[test]
fn a_step_up_needs_a_payer_and_happens_once() {
    let facts = Facts {
        payer_present: false,
        ..authentication()
    };
    assert_eq!(decide(&facts, none()), Err(NoRetry::NoPayer));
    let facts = Facts {
        stepped_up: true,
        ..authentication()
    };
    assert_eq!(decide(&facts, none()), Err(NoRetry::SteppedUpAlready));
}

/// What `cascade` relies on to read nothing for a decline it refuses anyway: a refusal on
/// what the declined attempt alone tells is the refusal, reason and all, whatever the
/// database would add.
#[test]
fn a_refusal_before_the_database_is_read_stands() {
    let codes = [
        DeclineCode::GenericDecline,
        DeclineCode::LostOrStolenCard,
        DeclineCode::AuthenticationRequired,
    ];
    for code in codes {
        for bits in 0u32..32 {
            let on = |bit: u32| bits & (1 << bit) != 0;
            let settings = RetrySettings {
                soft_declines: on(0),
                after_three_d_secure: on(1),
                max_attempts: 2,
            };
            let alone = Facts {
                decline: declined(code),
                settings,
                attempts: 1,
                three_d_secure_tried: on(2),
                stepped_up: on(2),
                payer_present: on(3),
                next_provider: on(4).then_some("second"),
            };
            let first = decide(&alone, none());
            for (attempts, tried, card) in [(1, false, 0), (2, true, 0), (1, true, 12)] {
                let read = Facts {
                    attempts,
                    three_d_secure_tried: alone.three_d_secure_tried || tried,
                    ..alone.clone()
                };
                let card = CardDeclines {
                    last_day: card,
                    last_30_days: card,
                };
                if let Err(why) = first {
                    assert_eq!(decide(&read, card), Err(why), "{code:?} {bits:b}");
                }
            }
        }
    }
}

#[test]
fn the_defaults_retry_no_soft_decline_in_two_attempts() {
    let d = RetrySettings::default();
    assert!(!d.soft_declines && !d.after_three_d_secure);
    assert_eq!(d.max_attempts, 2);
}
