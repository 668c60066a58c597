//! `Client`: calls a cronstable coordinator's executor API with a deadline on every call.
//!
//! A coordinator that does not answer in time is not an error for shouldRun: the client applies
//! the "no manager" rule itself (Leader jobs skip, PreferLeader and EveryNode jobs run), as the
//! cronstable shim does. Every other refusal (an unknown job, a malformed request) rejects with
//! a `CoordinatorError` carrying the coordinator's message.

import * as grpc from "@grpc/grpc-js";
import * as crypto from "node:crypto";
import * as os from "node:os";

import * as pb from "./gen/cronstable/v1/cronstable";
import {
  Answer,
  Instant,
  Instruction,
  Job,
  Kind,
  Policy,
  Reason,
  Registration,
  answerFromWire,
  stampFromWire,
  instructionFromWire,
  jobToWire,
  noManagerAnswer,
  toMs,
} from "./types";

// Codes that mean "no answer", not "the coordinator said no": the set the shim uses.
const UNREACHABLE = new Set<grpc.status>([
  grpc.status.UNAVAILABLE,
  grpc.status.DEADLINE_EXCEEDED,
  grpc.status.CANCELLED,
  grpc.status.UNKNOWN,
]);

/** A call the coordinator refused or did not answer. `code` is the gRPC status code. */
export class CoordinatorError extends Error {
  constructor(
    readonly method: string,
    readonly code: grpc.status,
    readonly details: string,
  ) {
    super(`${method}: ${grpc.status[code]}: ${details}`);
    this.name = "CoordinatorError";
  }

  /** True when the coordinator did not answer at all (in time). */
  get unreachable(): boolean {
    return UNREACHABLE.has(this.code);
  }
}

export interface ClientOptions {
  /** Deadline for each unary call, in milliseconds (default 1000). */
  timeoutMs?: number;
  /** Stable for this process, unique per node; default `node-<host>-<pid>`. */
  executorId?: string;
  /**
   * The coordinator's `api.authToken`, sent with every call as `authorization: Bearer
   * <token>`. A guarded coordinator refuses a call without it (UNAUTHENTICATED, rejected as a
   * CoordinatorError: a refusal is not "unreachable", so the no-manager rule does not apply).
   */
  token?: string;
}

export interface FiringOptions {
  kind?: Kind;
  attempt?: number;
  /** The policy the no-manager rule uses; default the registered one, else Leader. */
  policy?: Policy;
}

export interface FinishedOptions {
  startedAt: Instant;
  exitCode?: number;
  finishedAt?: Instant;
  signal?: number;
  timedOut?: boolean;
  outputTail?: string;
  kind?: Kind;
  attempt?: number;
}

/** What `Client.firing` did: the answer, and the body's result when it ran. */
export interface FiringOutcome<T> {
  answer: Answer;
  ran: boolean;
  result?: T;
}

/** `http://host:port` or `unix:/path` (the shim's syntax) as a grpc-js target. */
function channelTarget(target: string): string {
  if (target.startsWith("https://")) {
    throw new Error(`coordinator address ${target}: TLS is not supported on api.listen`);
  }
  return target.replace(/^(http|grpc):\/\//, "").replace(/\/$/, "");
}

type Unary<Req, Res> = (
  req: Req,
  metadata: grpc.Metadata,
  options: Partial<grpc.CallOptions>,
  callback: (err: grpc.ServiceError | null, res: Res) => void,
) => grpc.ClientUnaryCall;

/** A connection to one coordinator (usually the one on the same node). */
export class Client {
  readonly executorId: string;
  /**
   * New for every Client: the coordinator lets one live instance hold an executor id and
   * refuses another (FAILED_PRECONDITION, naming the holder).
   */
  readonly instanceId: string = crypto.randomBytes(16).toString("hex");
  readonly timeoutMs: number;
  private readonly stub: pb.ExecutorClient;
  private readonly token: string | undefined;
  private policies = new Map<string, Policy>();

  constructor(
    readonly target: string,
    options: ClientOptions = {},
  ) {
    this.timeoutMs = options.timeoutMs ?? 1000;
    this.executorId = options.executorId ?? `node-${os.hostname()}-${process.pid}`;
    this.token = options.token?.trim() || undefined;
    this.stub = new pb.ExecutorClient(channelTarget(target), grpc.credentials.createInsecure());
  }

  close(): void {
    this.stub.close();
  }

  /** The metadata every call carries: the API token, when one was given. */
  private metadata(): grpc.Metadata {
    const m = new grpc.Metadata();
    if (this.token !== undefined) m.set("authorization", `Bearer ${this.token}`);
    return m;
  }

  private call<Req, Res>(method: string, fn: Unary<Req, Res>, req: Req): Promise<Res> {
    return new Promise((resolve, reject) => {
      fn.call(
        this.stub,
        req,
        this.metadata(),
        { deadline: Date.now() + this.timeoutMs },
        (err, res) => {
          if (err) reject(new CoordinatorError(method, err.code, err.details));
          else resolve(res);
        },
      );
    });
  }

  /** Announces this executor's whole job set (replacing its previous one). */
  async register(jobs: Job[]): Promise<Registration> {
    const r = await this.call<pb.RegisterJobsRequest, pb.RegisterJobsResponse>(
      "RegisterJobs",
      this.stub.registerJobs,
      {
        executorId: this.executorId,
        jobs: jobs.map(jobToWire),
        instanceId: this.instanceId,
        pid: process.pid,
      },
    );
    this.policies = new Map(jobs.map((j) => [j.name, j.policy ?? Policy.CLUSTER_POLICY_LEADER]));
    const effectivePolicies: Record<string, Policy> = {};
    for (const e of r.jobs) effectivePolicies[e.name] = e.effectivePolicy;
    return {
      jobSetId: r.jobSetId,
      effectivePolicies,
      election: stampFromWire(r.election),
      warnings: r.warnings,
    };
  }

  /**
   * Asks whether this node runs one firing. When the coordinator cannot be reached the
   * no-manager rule decides, from `options.policy`, else the registered policy, else Leader
   * (the safe default: it never runs twice).
   */
  async shouldRun(job: string, scheduledAt: Instant, options: FiringOptions = {}): Promise<Answer> {
    const kind = options.kind ?? Kind.FIRING_KIND_SCHEDULED;
    try {
      const r = await this.call<pb.ShouldRunRequest, pb.ShouldRunResponse>(
        "ShouldRun",
        this.stub.shouldRun,
        {
          executorId: this.executorId,
          job,
          scheduledAtMs: toMs(scheduledAt),
          kind,
          attempt: options.attempt ?? 1,
          instanceId: this.instanceId,
        },
      );
      return answerFromWire(r);
    } catch (e) {
      if (!(e instanceof CoordinatorError) || !e.unreachable) throw e;
      const policy = options.policy ?? this.policies.get(job) ?? Policy.CLUSTER_POLICY_LEADER;
      return noManagerAnswer(policy, kind, e.message);
    }
  }

  private async report(
    job: string,
    scheduledAt: Instant,
    kind: Kind | undefined,
    attempt: number | undefined,
    event: Pick<pb.ReportRunRequest, "started" | "finished" | "skipped">,
  ): Promise<void> {
    await this.call<pb.ReportRunRequest, pb.ReportRunResponse>("ReportRun", this.stub.reportRun, {
      executorId: this.executorId,
      job,
      scheduledAtMs: toMs(scheduledAt),
      kind: kind ?? Kind.FIRING_KIND_SCHEDULED,
      attempt: attempt ?? 1,
      ...event,
    });
  }

  /** Records that a run began (by default now, in this process). */
  reportStarted(
    job: string,
    scheduledAt: Instant,
    options: { startedAt?: Instant; pid?: number; kind?: Kind; attempt?: number } = {},
  ): Promise<void> {
    const started = {
      startedAtMs: options.startedAt === undefined ? Date.now() : toMs(options.startedAt),
      pid: options.pid ?? process.pid,
    };
    return this.report(job, scheduledAt, options.kind, options.attempt, { started });
  }

  /** Records how a run ended: its exit code (default 0), or the signal that ended it. */
  reportFinished(job: string, scheduledAt: Instant, options: FinishedOptions): Promise<void> {
    const startedAtMs = toMs(options.startedAt);
    const finishedAtMs = options.finishedAt === undefined ? Date.now() : toMs(options.finishedAt);
    const finished: pb.RunFinished = {
      startedAtMs,
      finishedAtMs,
      exitCode: options.signal === undefined ? (options.exitCode ?? 0) : options.exitCode,
      signal: options.signal,
      timedOut: options.timedOut ?? false,
      outputTail: options.outputTail ?? "",
      durationMs: Math.max(0, finishedAtMs - startedAtMs),
    };
    return this.report(job, scheduledAt, options.kind, options.attempt, { finished });
  }

  /** Records a skip this executor decided on its own. */
  reportSkipped(
    job: string,
    scheduledAt: Instant,
    reason: Reason,
    message = "",
    options: { kind?: Kind; attempt?: number } = {},
  ): Promise<void> {
    return this.report(job, scheduledAt, options.kind, options.attempt, {
      skipped: { reason, message },
    });
  }

  /**
   * Hands the rest of a retry sequence to the cluster, after a shouldRun answer said another
   * node now owns the job. `transferred` false means nobody will resume it (no shared store):
   * the caller abandons the sequence and says so in its own log.
   */
  async handoff(
    job: string,
    scheduledAt: Instant,
    next: { remainingAttempts: number; nextAttempt: number; nextAttemptAt: Instant },
  ): Promise<{ transferred: boolean; message: string }> {
    const r = await this.call<pb.HandoffRequest, pb.HandoffResponse>("Handoff", this.stub.handoff, {
      executorId: this.executorId,
      job,
      scheduledAtMs: toMs(scheduledAt),
      remainingAttempts: next.remainingAttempts,
      nextAttemptAtMs: toMs(next.nextAttemptAt),
      nextAttempt: next.nextAttempt,
    });
    return { transferred: r.transferred, message: r.message };
  }

  /**
   * Opens this executor's instruction stream (Hello first). `timeoutMs` bounds the whole
   * stream; without it the stream stays open until `Watch.close`.
   */
  watch(options: { timeoutMs?: number } = {}): Watch {
    const callOptions: Partial<grpc.CallOptions> =
      options.timeoutMs === undefined ? {} : { deadline: Date.now() + options.timeoutMs };
    return new Watch(
      this.stub.watch(
        { executorId: this.executorId, instanceId: this.instanceId },
        this.metadata(),
        callOptions,
      ),
    );
  }

  /**
   * Asks about one firing and runs `body` only on RUN, reporting the start before it and the
   * finish after it (exit code 0, or 1 when it threw; the error is rethrown). A report the
   * coordinator does not take is logged, never thrown: the job runs (or ran) all the same.
   */
  async firing<T>(
    job: string,
    scheduledAt: Instant,
    body: (answer: Answer) => T | Promise<T>,
    options: FiringOptions = {},
  ): Promise<FiringOutcome<T>> {
    const answer = await this.shouldRun(job, scheduledAt, options);
    if (!answer.run) return { answer, ran: false };
    const { kind, attempt } = options;
    const startedAt = Date.now();
    await bestEffort(this.reportStarted(job, scheduledAt, { startedAt, kind, attempt }));
    let exitCode = 1;
    try {
      const result = await body(answer);
      exitCode = 0;
      return { answer, ran: true, result };
    } finally {
      await bestEffort(
        this.reportFinished(job, scheduledAt, { startedAt, exitCode, kind, attempt }),
      );
    }
  }

  /**
   * Wraps a job function: the returned function takes the firing's instant (default the
   * current minute, so every node names the same firing), runs `fn` only when this node
   * should, and resolves to its result, or undefined when the firing is not run here.
   */
  job<T>(
    name: string,
    fn: () => T | Promise<T>,
    options: FiringOptions = {},
  ): (scheduledAt?: Instant) => Promise<T | undefined> {
    return async (scheduledAt?: Instant) => {
      const at = scheduledAt ?? currentMinuteMs();
      const outcome = await this.firing(name, at, () => fn(), options);
      return outcome.result;
    };
  }
}

async function bestEffort(report: Promise<void>): Promise<void> {
  try {
    await report;
  } catch (e) {
    if (!(e instanceof CoordinatorError)) throw e;
    console.warn(`cronstable: could not report to the coordinator: ${e.message}`);
  }
}

function currentMinuteMs(): number {
  const now = Date.now();
  return now - (now % 60_000);
}

/** An open instruction stream: `for await` over it, `close()` to hang up. */
export class Watch implements AsyncIterable<Instruction> {
  private closed = false;

  constructor(private readonly call: grpc.ClientReadableStream<pb.Instruction>) {}

  async *[Symbol.asyncIterator](): AsyncIterator<Instruction> {
    try {
      for await (const wire of this.call as AsyncIterable<pb.Instruction>) {
        const instruction = instructionFromWire(wire);
        if (instruction) yield instruction;
      }
    } catch (e) {
      const err = e as grpc.ServiceError;
      if (this.closed && err.code === grpc.status.CANCELLED) return;
      throw new CoordinatorError("Watch", err.code, err.details);
    }
  }

  close(): void {
    this.closed = true;
    this.call.cancel();
  }
}
