//! TypeScript client for a cronstable coordinator's executor API (cronstable.v1.Executor).
//!
//!     const client = new Client("http://127.0.0.1:7400");
//!     await client.register([{ name: "charge-cards", schedule: "0 * * * *", command: "./charge.sh" }]);
//!     await client.firing("charge-cards", scheduledAt, () => charge());

export { Client, CoordinatorError, Watch } from "./client";
export type { ClientOptions, FinishedOptions, FiringOptions, FiringOutcome } from "./client";
export {
  CatchUp,
  ElectionMode,
  Kind,
  Policy,
  Reason,
  Verdict,
  noManagerAnswer,
  toMs,
} from "./types";
export type { Answer, ElectionStamp, Instant, Instruction, Job, Registration } from "./types";
