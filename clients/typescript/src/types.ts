//! The client's own vocabulary: job definitions, answers, instructions and the no-manager rule,
//! as plain objects over the generated enums, so callers never build protobuf messages.

import * as pb from "./gen/cronstable/v1/cronstable";

export {
  CatchUp,
  ClusterPolicy as Policy,
  ElectionMode,
  FiringKind as Kind,
  Reason,
  Verdict,
} from "./gen/cronstable/v1/cronstable";
import {
  CatchUp,
  ClusterPolicy as Policy,
  ElectionMode,
  FiringKind as Kind,
  Reason,
  Verdict,
} from "./gen/cronstable/v1/cronstable";

/** A point in time: Unix epoch milliseconds or a Date. */
export type Instant = number | Date;

/** Epoch milliseconds for `at`; refuses non-integers and invalid dates rather than rounding. */
export function toMs(at: Instant): number {
  const ms = at instanceof Date ? at.getTime() : at;
  if (!Number.isSafeInteger(ms)) {
    throw new TypeError(`expected epoch milliseconds or a valid Date, got ${String(at)}`);
  }
  return ms;
}

/** One job as an executor announces it with `Client.register`. */
export interface Job {
  name: string;
  schedule: string;
  command: string;
  policy?: Policy;
  timezone?: string;
  environment?: Record<string, string>;
  timeoutMs?: number;
  retries?: number;
  /** How late a scheduled firing may still be asked about and start; default 90 s. */
  startingDeadlineMs?: number;
  /**
   * Whether an instant nobody ran still runs on the job's owner while it is at most
   * `catchUpWindowMs` old (LATEST: the newest; ALL: each, up to `catchUpLimit`, default 10).
   * Leader jobs on the lease backends only.
   */
  catchUp?: CatchUp;
  catchUpWindowMs?: number;
  catchUpLimit?: number;
  /**
   * What every firing is expected to do, judged once for the cluster on the job's owner: a run
   * succeeded within `expectCompleteWithinMs` of the instant (else "missed"), and none ran
   * longer than `expectMaxDurationMs` (else "too_long"). Unset for none.
   */
  expectCompleteWithinMs?: number;
  expectMaxDurationMs?: number;
}

export function jobToWire(job: Job): pb.JobDefinition {
  return {
    name: job.name,
    schedule: job.schedule,
    command: job.command,
    stdin: "",
    clusterPolicy: job.policy ?? Policy.CLUSTER_POLICY_LEADER,
    timezone: job.timezone ?? "",
    environment: { ...(job.environment ?? {}) },
    timeoutMs: job.timeoutMs ?? 0,
    retries: job.retries ?? 0,
    retryBackoffMs: 0,
    retryBackoffMaxMs: 0,
    concurrencyPolicy: pb.ConcurrencyPolicy.CONCURRENCY_POLICY_UNSPECIFIED,
    startingDeadlineMs: job.startingDeadlineMs ?? 0,
    catchUp: job.catchUp ?? CatchUp.CATCH_UP_UNSPECIFIED,
    catchUpWindowMs: job.catchUpWindowMs ?? 0,
    catchUpLimit: job.catchUpLimit ?? 0,
    expectCompleteWithinMs: job.expectCompleteWithinMs ?? 0,
    expectMaxDurationMs: job.expectMaxDurationMs ?? 0,
  };
}

/**
 * The coordinator's election mode and the generation it was said in. Only OFF lets an executor
 * keep running Leader jobs while its coordinator is away; UNSPECIFIED means unknown (an older
 * coordinator, or a stopping one that cannot vouch for its next start). Generations grow with
 * every coordinator start and change of mode (its farewell included): apply stamps in
 * generation order, so a late answer from a process that has moved on changes nothing.
 */
export interface ElectionStamp {
  mode: ElectionMode;
  generation: number;
}

export function stampFromWire(s: pb.ElectionStamp | undefined): ElectionStamp {
  return {
    mode: known<ElectionMode>(ElectionMode, s?.mode ?? 0, ElectionMode.ELECTION_MODE_UNSPECIFIED),
    generation: s?.generation ?? 0,
  };
}

/** RegisterJobs' answer. */
export interface Registration {
  jobSetId: string;
  effectivePolicies: Record<string, Policy>;
  election: ElectionStamp;
  /** One per job whose schedule will not fire for years or ever (it is registered all the same). */
  warnings: string[];
}

/** A ShouldRun answer. `local` is true when the client decided it by the no-manager rule. */
export interface Answer {
  verdict: Verdict;
  reason: Reason;
  message: string;
  owner: string;
  fence?: string;
  retryAfterMs: number;
  firingId: string;
  nodeName: string;
  local: boolean;
  /** True for RUN. */
  run: boolean;
  /** The coordinator's election mode when it answered (absent when decided locally). */
  election?: ElectionStamp;
}

// An enum value this client does not know reads as the zero value (the proto's rule).
function known<E extends number>(values: object, v: number, zero: E): E {
  return Object.values(values).includes(v) && v >= 0 ? (v as E) : zero;
}

export function answerFromWire(r: pb.ShouldRunResponse): Answer {
  const verdict = known<Verdict>(Verdict, r.verdict, Verdict.VERDICT_UNSPECIFIED);
  return {
    verdict,
    reason: known<Reason>(Reason, r.reason, Reason.REASON_UNSPECIFIED),
    message: r.message,
    owner: r.owner,
    fence: r.fence,
    retryAfterMs: r.retryAfterMs,
    firingId: r.firingId,
    nodeName: r.nodeName,
    local: false,
    run: verdict === Verdict.VERDICT_RUN,
    election: stampFromWire(r.election),
  };
}

/**
 * The "no manager" row of the decision table, applied by the client when the coordinator
 * cannot be reached: manual starts, EveryNode and PreferLeader jobs run; Leader jobs skip.
 * The cronstable shim applies the same rule.
 */
export function noManagerAnswer(policy: Policy, kind: Kind, why: string): Answer {
  let verdict: Verdict = Verdict.VERDICT_RUN;
  let reason: Reason;
  if (kind === Kind.FIRING_KIND_MANUAL) {
    reason = Reason.REASON_MANUAL;
  } else if (policy === Policy.CLUSTER_POLICY_EVERY_NODE) {
    reason = Reason.REASON_EVERY_NODE;
  } else if (policy === Policy.CLUSTER_POLICY_PREFER_LEADER) {
    reason = Reason.REASON_NO_MANAGER;
  } else {
    verdict = Verdict.VERDICT_SKIP;
    reason = Reason.REASON_COORDINATOR_UNREACHABLE;
  }
  return {
    verdict,
    reason,
    message: why,
    owner: "",
    retryAfterMs: 1000,
    firingId: "",
    nodeName: "",
    local: true,
    run: verdict === Verdict.VERDICT_RUN,
  };
}

/** One instruction from a Watch stream. */
export type Instruction =
  | { kind: "hello"; nodeName: string; jobSetId: string; election: ElectionStamp }
  | { kind: "manualStart"; job: string; requestedAtMs: number; requestId: string }
  | { kind: "runDeferred"; job: string; scheduledAtMs: number }
  /** A missed instant nobody ran: ask shouldRun with Kind CATCH_UP first, then run it marked. */
  | { kind: "catchUp"; job: string; scheduledAtMs: number }
  | {
      kind: "resumeRetry";
      job: string;
      scheduledAtMs: number;
      nextAttempt: number;
      remainingAttempts: number;
      notBeforeMs: number;
    }
  | { kind: "jobSetChanged"; jobSetId: string }
  /** The last instruction of a coordinator that stops gracefully: the mode to remember. */
  | { kind: "goodbye"; election: ElectionStamp };

/** The instruction, or undefined for a kind this client does not know (callers skip it). */
export function instructionFromWire(i: pb.Instruction): Instruction | undefined {
  if (i.hello) {
    const { nodeName, jobSetId, election } = i.hello;
    return { kind: "hello", nodeName, jobSetId, election: stampFromWire(election) };
  }
  if (i.manualStart) return { kind: "manualStart", ...i.manualStart };
  if (i.runDeferred) return { kind: "runDeferred", ...i.runDeferred };
  if (i.catchUp) return { kind: "catchUp", ...i.catchUp };
  if (i.resumeRetry) return { kind: "resumeRetry", ...i.resumeRetry };
  if (i.jobSetChanged) return { kind: "jobSetChanged", ...i.jobSetChanged };
  if (i.goodbye) return { kind: "goodbye", election: stampFromWire(i.goodbye.election) };
  return undefined;
}
