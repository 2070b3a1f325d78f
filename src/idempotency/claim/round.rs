//! What one round of the claim statement came to, judged from the row it returned: the
//! work done, a replay, nothing to do, a key to free or take over, or a key still held.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::statement::ClaimRow;
use super::unreadable;
use crate::idempotency::in_flight::{KeyState, ResourceType};
use crate::idempotency::{ExpiredKey, IdempotencyError, KeyedRequest};

pub(super) enum Round {
    Done(Value),
    Replay {
        status: u16,
        current: Value,
    },
    /// Nobody has the key and the work did not run.
    Nothing,
    /// The key's time is up and it may be opened afresh: delete it and claim again.
    Free,
    /// In flight past its lease: whoever held it died.
    Orphaned {
        current: Value,
    },
    /// Another request holds the key (until `lease_ends`, if it has committed it).
    Busy {
        lease_ends: Option<DateTime<Utc>>,
    },
}

pub(super) fn judge(row: ClaimRow, request: &KeyedRequest) -> Result<Round, IdempotencyError> {
    if row.recorded {
        return Ok(Round::Done(row.fresh.unwrap_or(Value::Null)));
    }
    let (Some(operation), Some(fingerprint), Some(state), Some(expires_at)) =
        (row.operation, row.fingerprint, row.state, row.expires_at)
    else {
        // No committed key: either nobody has it, or a request is inside its statement now.
        return Ok(if row.got {
            Round::Nothing
        } else {
            Round::Busy { lease_ends: None }
        });
    };
    let state = KeyState::parse(&state)
        .ok_or_else(|| unreadable(format!("a key in an unknown state {state:?}")))?;
    let now = Utc::now();
    // Past its lifetime (and a completed key only once its work is final), the key no longer
    // answers for the request that made it, whatever this one's body: see the module comment.
    let past_ttl = match state {
        KeyState::Expired => true,
        KeyState::Completed => row.unresolved == Some(false) && expires_at <= now,
        KeyState::InFlight => false,
    };
    if past_ttl {
        let resource = row.resource_type.as_deref().and_then(ResourceType::parse);
        let made_money_move = resource.is_some_and(ResourceType::made_money_move);
        return match (made_money_move, state) {
            (true, KeyState::Expired) if expires_at <= now => Ok(Round::Free),
            (true, _) => Err(IdempotencyError::Expired(Box::new(ExpiredKey::read(
                row.resource_type.unwrap_or_default(),
                row.resource_id.unwrap_or_default(),
                row.current.as_ref().unwrap_or(&Value::Null),
            )))),
            (false, _) => Ok(Round::Free),
        };
    }
    if fingerprint != request.fingerprint.as_slice() || operation != request.operation.as_str() {
        return Err(IdempotencyError::Reused);
    }
    if state == KeyState::Completed {
        return Ok(Round::Replay {
            status: row.response_status.map_or(200, |s| s as u16),
            current: row.current.unwrap_or(Value::Null),
        });
    }
    // The lease is over only if the statement itself saw it over (it read `current` then):
    // judged by this clock alone, a lease that ran out between the statement's `now()` and
    // here would hand a takeover no resource to resume.
    match (row.locked_until, row.current) {
        (Some(until), Some(current)) if until <= now => Ok(Round::Orphaned { current }),
        (None, Some(current)) => Ok(Round::Orphaned { current }),
        (until, _) => Ok(Round::Busy { lease_ends: until }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idempotency::{fingerprint, IdempotencyKey, Operation};
    use crate::ids::MerchantId;

    fn request() -> KeyedRequest {
        KeyedRequest {
            merchant_id: MerchantId(uuid::Uuid::now_v7()),
            key: IdempotencyKey::parse(Some(b"k")).unwrap(),
            operation: Operation::CreateRefund,
            fingerprint: fingerprint("POST", "/v1/payments/p/refunds", None),
            request_id: "req_test".into(),
        }
    }

    /// A key in flight whose lease ends at `locked_until`, as the claim statement read it.
    fn in_flight(
        request: &KeyedRequest,
        locked_until: DateTime<Utc>,
        current: Option<Value>,
    ) -> ClaimRow {
        ClaimRow {
            got: true,
            recorded: false,
            operation: Some(request.operation.as_str().into()),
            fingerprint: Some(request.fingerprint.as_slice().to_vec()),
            state: Some(KeyState::InFlight.as_str().into()),
            locked_until: Some(locked_until),
            response_status: None,
            resource_type: Some(ResourceType::Refund.as_str().into()),
            resource_id: Some(uuid::Uuid::now_v7()),
            expires_at: Some(Utc::now() + chrono::Duration::hours(1)),
            unresolved: Some(true),
            made: None,
            fresh: None,
            current,
        }
    }

    #[test]
    fn a_lease_the_statement_still_saw_running_is_waited_for_not_taken_over() {
        // The lease ran out between the statement's `now()` and the judging: the statement
        // read no resource, so there is nothing to resume yet; the next round takes it over.
        let request = request();
        let ended = Utc::now() - chrono::Duration::milliseconds(5);
        let round = judge(in_flight(&request, ended, None), &request).unwrap();
        assert!(matches!(round, Round::Busy { .. }));
        let current = serde_json::json!({"refund": {"id": "x"}});
        let round = judge(in_flight(&request, ended, Some(current.clone())), &request).unwrap();
        assert!(matches!(round, Round::Orphaned { current: c } if c == current));
    }
}
