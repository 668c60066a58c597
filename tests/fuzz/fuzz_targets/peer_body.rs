//! A peer's `/peer` body (JSON, from the network, after mTLS): any bytes. It never panics; a
//! body that breaks a bound is "no data" with a reason.
#![no_main]

use cronstable_coordinator::gossip::wire;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match wire::decode(data) {
        Ok(body) => {
            // What was accepted passes the bounds again on its own.
            wire::check(&body.report).expect("an accepted report passes its own check");
        }
        Err(e) => assert!(
            !e.to_string().trim().is_empty(),
            "a refusal without a reason"
        ),
    }
});
