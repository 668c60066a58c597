//! Talking to the coordinator: the channel ([`channel`]), the gRPC client with a deadline on
//! every call ([`client`]), the
//! batching of questions asked at one instant into `ShouldRunBatch` ([`batch`]), why a call got
//! no answer ([`call_error`]), the API token ([`token`]), and the routing of the Watch
//! stream's `RunDeferred` pushes ([`wakeups`]).

pub mod batch;
pub mod call_error;
pub mod channel;
pub mod client;
pub mod token;
pub mod wakeups;
