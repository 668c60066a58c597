//! A peer's `X-Cronstable-Node-Stats` header: any bytes a header can carry. It never panics; an
//! accepted value is plausible and survives a round trip through the header form.
#![no_main]

use cronstable_coordinator::gossip::node_stats::PeerNodeStats;
use http::HeaderValue;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = HeaderValue::from_bytes(data) else {
        return;
    };
    if let Some(stats) = PeerNodeStats::from_header(&value) {
        let again = stats.to_header().expect("an accepted value fits again");
        assert_eq!(PeerNodeStats::from_header(&again), Some(stats));
    }
});
