//! The conformance cases of clients/conformance/cases.yaml, each under its id, against live
//! coordinator processes; and the check that every listed case is implemented here.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";

import * as grpc from "@grpc/grpc-js";
import { parse } from "yaml";

import {
  Answer,
  CatchUp,
  Client,
  CoordinatorError,
  ElectionMode,
  Instruction,
  Kind,
  Policy,
  Reason,
  Verdict,
} from "../src";
import {
  Coordinator,
  coordinatorBinary,
  freePort,
  leaseYaml,
  lonelyGossipYaml,
  waitFor,
} from "./harness";

// dist/test/ at run time, test/ when read: cases.yaml is two levels above the package.
const CASES = path.resolve(__dirname, "..", "..", "..", "conformance", "cases.yaml");
// A whole-minute instant, as a cron firing would have: an hour ahead, so no question about it is
// ever past the job's start deadline (a scheduled firing asked about more than 90 s after its
// instant is skipped as late), however long the suite runs.
const AT = (Math.floor(Date.now() / 60_000) + 60) * 60_000;

// Fail the whole file at load, loudly, when the binary is missing.
coordinatorBinary();

const unique = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;
const clients: Client[] = [];
function clientFor(c: Coordinator | string, timeoutMs = 2000): Client {
  const target = typeof c === "string" ? c : c.api;
  const client = new Client(target, { timeoutMs, executorId: unique("ts-executor") });
  clients.push(client);
  return client;
}
const job = (name: string, policy = Policy.CLUSTER_POLICY_LEADER, schedule = "* * * * *") => ({
  name,
  schedule,
  command: "true",
  policy,
});

async function refusal(p: Promise<unknown>): Promise<CoordinatorError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof CoordinatorError, `expected a CoordinatorError, got ${String(e)}`);
    return e;
  }
  assert.fail("the call succeeded; a refusal was expected");
}

const implemented = new Set<string>();
/** Registers a conformance case: a test titled "<id> <title>". */
function conformance(id: string, title: string, body: () => Promise<void>): void {
  implemented.add(id);
  test(`${id} ${title}`, body);
}

describe("conformance", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cronstable-ts-"));
  let electionOff: Coordinator;
  let leasePair: Promise<[Coordinator, Coordinator]> | undefined;
  let lonely: Promise<Coordinator> | undefined;
  let guardedOne: Promise<Coordinator> | undefined;
  const started: Coordinator[] = [];

  /** (leader, follower): two filesystem-lease coordinators on one store, once one leads. */
  function lease(): Promise<[Coordinator, Coordinator]> {
    leasePair ??= (async () => {
      const store = path.join(dir, "store");
      fs.mkdirSync(store);
      const nodes: Coordinator[] = [];
      for (const name of ["a", "b"]) {
        nodes.push(await Coordinator.start(dir, name, () => leaseYaml(name, store)));
        started.push(nodes[nodes.length - 1]);
      }
      return waitFor("exactly one of the lease pair to lead", async () => {
        const leading: Coordinator[] = [];
        for (const n of nodes)
          if ((await n.http("GET", "/cluster"))?.body?.is_leader) leading.push(n);
        if (leading.length !== 1) return undefined;
        return [leading[0], nodes.find((n) => n !== leading[0])!] as [Coordinator, Coordinator];
      });
    })();
    return leasePair;
  }

  /** Gossip node n1 without a quorum, once its manager reports so on GET /cluster. */
  function lonelyGossip(): Promise<Coordinator> {
    lonely ??= (async () => {
      const home = path.join(dir, "lonely");
      fs.mkdirSync(home);
      const c = await Coordinator.start(home, "n1", () => lonelyGossipYaml(home));
      started.push(c);
      await waitFor("n1's gossip manager to report no quorum", async () => {
        const body = (await c.http("GET", "/cluster"))?.body;
        return body?.enabled && body.quorate === false ? true : undefined;
      });
      return c;
    })();
    return lonely;
  }

  /** An election-off coordinator whose API needs the token "conformance-token". */
  function guarded(): Promise<Coordinator> {
    guardedOne ??= (async () => {
      const c = await Coordinator.start(
        dir,
        "guarded",
        () => "",
        "  authToken:\n    value: conformance-token\n",
      );
      started.push(c);
      return c;
    })();
    return guardedOne;
  }

  /** Both nodes' answers for one firing, once the follower has seen who leads. */
  async function settledAnswers(name: string): Promise<{ clients: Client[]; answers: Answer[] }> {
    const [leader, follower] = await lease();
    const pair = [clientFor(leader), clientFor(follower)];
    for (const c of pair) await c.register([job(name)]);
    const answers = await waitFor("the follower to see the leader", async () => {
      const a = [await pair[0].shouldRun(name, AT), await pair[1].shouldRun(name, AT)];
      return a[1].owner === leader.name ? a : undefined;
    });
    return { clients: pair, answers };
  }

  before(async () => {
    electionOff = await Coordinator.start(dir, "election-off");
    started.push(electionOff);
  });
  after(() => {
    for (const c of clients) c.close();
    for (const c of started) c.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test("every case in cases.yaml is implemented", () => {
    const listed = new Set<string>(
      parse(fs.readFileSync(CASES, "utf8")).cases.map((c: { id: string }) => c.id),
    );
    assert.ok(listed.size > 0, `no cases in ${CASES}`);
    assert.deepEqual(
      [...listed].filter((id) => !implemented.has(id)),
      [],
      "cases without a TypeScript test",
    );
    assert.deepEqual(
      [...implemented].filter((id) => !listed.has(id)),
      [],
      "tests for unlisted cases",
    );
  });

  conformance(
    "CONF-01",
    "should_run on an election-off coordinator returns RUN/ELECTION_OFF",
    async () => {
      const client = clientFor(electionOff);
      const name = unique("conf01");
      await client.register([job(name)]);
      const a = await client.shouldRun(name, AT);
      assert.equal(a.verdict, Verdict.VERDICT_RUN);
      assert.equal(a.reason, Reason.REASON_ELECTION_OFF);
      assert.ok(a.run && a.message && !a.local, JSON.stringify(a));
      assert.equal(a.nodeName, electionOff.nodeName());
      assert.match(a.firingId, /^v1:[0-9a-f]{32}$/);
      assert.equal(a.fence, undefined);
    },
  );

  conformance("CONF-02", "should_run for an unknown job is NOT_FOUND naming the job", async () => {
    const name = unique("no-such-job");
    const e = await refusal(clientFor(electionOff).shouldRun(name, AT));
    assert.equal(e.code, grpc.status.NOT_FOUND);
    assert.ok(e.details.includes(name), e.details);
  });

  conformance(
    "CONF-03",
    "an unspecified firing kind is INVALID_ARGUMENT naming the field",
    async () => {
      const client = clientFor(electionOff);
      const name = unique("conf03");
      await client.register([job(name)]);
      const e = await refusal(client.shouldRun(name, AT, { kind: Kind.FIRING_KIND_UNSPECIFIED }));
      assert.equal(e.code, grpc.status.INVALID_ARGUMENT);
      assert.ok(e.details.includes("kind"), e.details);
      const retry = await refusal(
        client.shouldRun(name, AT, { kind: Kind.FIRING_KIND_RETRY, attempt: 1 }),
      );
      assert.equal(retry.code, grpc.status.INVALID_ARGUMENT);
      assert.ok(retry.details.includes("attempt"), retry.details);
    },
  );

  conformance("CONF-04", "register returns the job-set ID and the effective policies", async () => {
    const client = clientFor(electionOff);
    const [leader, prefer] = [unique("conf04-leader"), unique("conf04-prefer")];
    const jobs = [
      job(leader, Policy.CLUSTER_POLICY_LEADER, "0 * * * *"),
      job(prefer, Policy.CLUSTER_POLICY_PREFER_LEADER, "@daily"),
    ];
    const r = await client.register(jobs);
    assert.match(r.jobSetId, /^v1:[0-9a-f]{64}$/);
    const http = await electionOff.http("GET", "/job-set-id");
    assert.equal(http?.status, 200);
    assert.equal(http?.body.job_set_id, r.jobSetId);
    assert.deepEqual(r.effectivePolicies, {
      [leader]: Policy.CLUSTER_POLICY_EVERY_NODE,
      [prefer]: Policy.CLUSTER_POLICY_EVERY_NODE,
    });
    assert.equal((await client.register(jobs)).jobSetId, r.jobSetId);
  });

  conformance("CONF-05", "report started and finished are accepted and recorded", async () => {
    const client = clientFor(electionOff);
    const name = unique("conf05");
    await client.register([job(name)]);
    const startedAt = Date.now();
    await client.reportStarted(name, AT, { startedAt, pid: 4242 });
    await client.reportFinished(name, AT, { startedAt, exitCode: 3 });
    await waitFor("the start in the log", () =>
      electionOff.logLines(`job="${name}"`, "run started", "pid=4242").length ? true : undefined,
    );
    await waitFor("the finish in the log", () =>
      electionOff.logLines(`job="${name}"`, "run finished", "exit_code=Some(3)").length
        ? true
        : undefined,
    );
    const e = await refusal(client.reportStarted(unique("unregistered"), AT));
    assert.equal(e.code, grpc.status.NOT_FOUND);
  });

  conformance(
    "CONF-06",
    "with the coordinator unreachable the client applies the no-manager rule",
    async () => {
      const client = clientFor(`http://127.0.0.1:${await freePort()}`, 500);
      const e = await refusal(client.register([job("leader-job")]));
      assert.ok(e.unreachable, e.message);
      const cases: [string, Policy, Kind, Verdict, Reason][] = [
        [
          "leader-job",
          Policy.CLUSTER_POLICY_LEADER,
          Kind.FIRING_KIND_SCHEDULED,
          Verdict.VERDICT_SKIP,
          Reason.REASON_COORDINATOR_UNREACHABLE,
        ],
        [
          "prefer-job",
          Policy.CLUSTER_POLICY_PREFER_LEADER,
          Kind.FIRING_KIND_SCHEDULED,
          Verdict.VERDICT_RUN,
          Reason.REASON_NO_MANAGER,
        ],
        [
          "every-job",
          Policy.CLUSTER_POLICY_EVERY_NODE,
          Kind.FIRING_KIND_SCHEDULED,
          Verdict.VERDICT_RUN,
          Reason.REASON_EVERY_NODE,
        ],
        [
          "leader-job",
          Policy.CLUSTER_POLICY_LEADER,
          Kind.FIRING_KIND_MANUAL,
          Verdict.VERDICT_RUN,
          Reason.REASON_MANUAL,
        ],
      ];
      for (const [name, policy, kind, verdict, reason] of cases) {
        const began = Date.now();
        const a = await client.shouldRun(name, AT, { kind, policy });
        assert.ok(Date.now() - began < client.timeoutMs + 1000, `${name} took too long`);
        assert.deepEqual(
          [a.verdict, a.reason, a.local],
          [verdict, reason, true],
          `${name} ${Kind[kind]}: ${JSON.stringify(a)}`,
        );
      }
      // Without a policy the job is treated as Leader: the safe default.
      assert.equal((await client.shouldRun("unknown-policy", AT)).verdict, Verdict.VERDICT_SKIP);
    },
  );

  conformance("CONF-07", "watch yields Hello first", async () => {
    const client = clientFor(electionOff);
    const r = await client.register([job(unique("conf07"))]);
    const stream = client.watch({ timeoutMs: 10_000 });
    let first: Instruction | undefined;
    for await (const i of stream) {
      first = i;
      break;
    }
    stream.close();
    assert.deepEqual(first, {
      kind: "hello",
      nodeName: electionOff.nodeName(),
      jobSetId: r.jobSetId,
      election: r.election,
    });
  });

  conformance("CONF-08", "a manual start POSTed to the HTTP API arrives on Watch", async () => {
    const client = clientFor(electionOff);
    const name = unique("conf08");
    await client.register([job(name, Policy.CLUSTER_POLICY_LEADER, "@yearly")]);
    const stream = client.watch({ timeoutMs: 20_000 });
    let requestId: string | undefined;
    let manual: Instruction | undefined;
    for await (const i of stream) {
      if (requestId === undefined) {
        assert.equal(i.kind, "hello");
        const posted = await electionOff.http("POST", `/jobs/${name}/start`);
        assert.equal(posted?.status, 202, JSON.stringify(posted));
        requestId = posted!.body.request_id;
        continue;
      }
      if (i.kind === "jobSetChanged") continue;
      manual = i;
      break;
    }
    stream.close();
    assert.ok(
      manual?.kind === "manualStart",
      `expected a manual start, got ${JSON.stringify(manual)}`,
    );
    assert.equal(manual.job, name);
    assert.equal(manual.requestId, requestId);
    assert.ok(manual.requestedAtMs > 0);
  });

  conformance(
    "CONF-09",
    "on a lease backend the leader runs with a fence and the other node skips",
    async () => {
      const [leader] = await lease();
      const {
        answers: [lead, other],
      } = await settledAnswers(unique("conf09"));
      assert.deepEqual(
        [lead.verdict, lead.reason],
        [Verdict.VERDICT_RUN, Reason.REASON_LEADER],
        JSON.stringify(lead),
      );
      assert.match(lead.fence ?? "", /^fence:\d+$/);
      assert.equal(lead.owner, leader.name);
      assert.equal(lead.nodeName, leader.name);
      assert.deepEqual(
        [other.verdict, other.reason],
        [Verdict.VERDICT_SKIP, Reason.REASON_NOT_LEADER],
        JSON.stringify(other),
      );
      assert.equal(other.owner, leader.name);
      assert.equal(other.fence, undefined);
      assert.equal(lead.firingId, other.firingId);
    },
  );

  conformance(
    "CONF-10",
    "the firing wrapper runs the body only on RUN and reports its outcome",
    async () => {
      const client = clientFor(electionOff);
      const [ok, failing] = [unique("conf10-ok"), unique("conf10-fail")];
      await client.register([job(ok), job(failing)]);
      const ran: string[] = [];
      const outcome = await client.firing(ok, AT, () => {
        ran.push(ok);
        return 7;
      });
      assert.deepEqual([outcome.ran, outcome.result], [true, 7]);
      await assert.rejects(
        client.firing(failing, AT, () => {
          ran.push(failing);
          throw new RangeError("the job failed");
        }),
        RangeError,
      );
      assert.deepEqual(ran, [ok, failing]);
      for (const [name, code] of [
        [ok, 0],
        [failing, 1],
      ] as const) {
        await waitFor(`${name}'s start`, () =>
          electionOff.logLines(`job="${name}"`, "run started").length ? true : undefined,
        );
        await waitFor(`${name}'s finish with exit code ${code}`, () =>
          electionOff.logLines(`job="${name}"`, "run finished", `exit_code=Some(${code})`).length
            ? true
            : undefined,
        );
      }

      // The job() wrapper, on the lease pair's follower: it must not run the body.
      const [, follower] = await lease();
      const name = unique("conf10-skip");
      const {
        clients: [, onFollower],
      } = await settledAnswers(name);
      const wrapped = onFollower.job(name, () => {
        ran.push(name);
        return "ran";
      });
      assert.equal(await wrapped(AT), undefined);
      assert.ok(!ran.includes(name));
      assert.deepEqual(follower.logLines(`job="${name}"`, "run started"), []);
    },
  );

  conformance(
    "CONF-11",
    "a gossip node without a quorum skips Leader firings and defers their retries",
    async () => {
      const client = clientFor(await lonelyGossip());
      const [leader, every] = [unique("conf11-leader"), unique("conf11-every")];
      const r = await client.register([job(leader), job(every, Policy.CLUSTER_POLICY_EVERY_NODE)]);
      assert.deepEqual(r.effectivePolicies, {
        [leader]: Policy.CLUSTER_POLICY_LEADER,
        [every]: Policy.CLUSTER_POLICY_EVERY_NODE,
      });
      const asked: [string, Kind, number, Verdict, Reason][] = [
        [leader, Kind.FIRING_KIND_SCHEDULED, 1, Verdict.VERDICT_SKIP, Reason.REASON_NO_QUORUM],
        [leader, Kind.FIRING_KIND_RETRY, 2, Verdict.VERDICT_DEFER, Reason.REASON_NO_QUORUM],
        [leader, Kind.FIRING_KIND_MANUAL, 1, Verdict.VERDICT_RUN, Reason.REASON_MANUAL],
        [every, Kind.FIRING_KIND_SCHEDULED, 1, Verdict.VERDICT_RUN, Reason.REASON_EVERY_NODE],
      ];
      for (const [name, kind, attempt, verdict, reason] of asked) {
        const a = await client.shouldRun(name, AT, { kind, attempt });
        assert.deepEqual(
          [a.verdict, a.reason],
          [verdict, reason],
          `${name} ${Kind[kind]}: ${JSON.stringify(a)}`,
        );
        assert.ok(a.nodeName === "n1" && !a.local, JSON.stringify(a));
        if (verdict === Verdict.VERDICT_DEFER) assert.ok(a.retryAfterMs > 0, JSON.stringify(a));
      }
    },
  );

  conformance(
    "CONF-12",
    "a handoff on a node without a shared store is recorded but not transferred",
    async () => {
      const client = clientFor(electionOff);
      const name = unique("conf12");
      await client.register([{ name, schedule: "* * * * *", command: "false", retries: 2 }]);
      const next = { remainingAttempts: 2, nextAttempt: 2, nextAttemptAt: AT + 1000 };
      const h = await client.handoff(name, AT, next);
      assert.equal(h.transferred, false);
      assert.ok(h.message.includes("abandoned"), h.message);
      const e = await refusal(client.handoff(unique("unregistered"), AT, next));
      assert.equal(e.code, grpc.status.NOT_FOUND);
    },
  );

  conformance(
    "CONF-13",
    "a second client under a live client's executor id is refused, naming the first",
    async () => {
      const first = clientFor(electionOff);
      const second = new Client(electionOff.api, { timeoutMs: 2000, executorId: first.executorId });
      clients.push(second);
      const name = unique("conf13");
      await first.register([job(name)]);
      const e = await refusal(second.register([job(name)]));
      assert.equal(e.code, grpc.status.FAILED_PRECONDITION);
      assert.ok(e.details.includes(first.instanceId), e.details);
      const asked = await refusal(second.shouldRun(name, AT));
      assert.equal(asked.code, grpc.status.FAILED_PRECONDITION);
      assert.equal((await first.shouldRun(name, AT)).verdict, Verdict.VERDICT_RUN);
    },
  );

  conformance(
    "CONF-14",
    "the coordinator states its election mode, and a graceful stop says goodbye",
    async () => {
      const own = await Coordinator.start(dir, "conf14");
      started.push(own);
      const client = clientFor(own);
      const name = unique("conf14");
      const off = (await client.register([job(name)])).election;
      assert.equal(off.mode, ElectionMode.ELECTION_MODE_OFF);
      assert.ok(off.generation > 0, JSON.stringify(off));
      assert.deepEqual((await client.shouldRun(name, AT)).election, off);
      const stream = client.watch({ timeoutMs: 30_000 });
      const seen: Instruction[] = [];
      try {
        for await (const i of stream) {
          seen.push(i);
          if (seen.length === 1) assert.equal(await own.terminate(), 0, own.log());
        }
      } catch (e) {
        // The connection may go before the stream's trailers; what came first counts.
        assert.ok(e instanceof CoordinatorError, String(e));
        assert.equal(e.code, grpc.status.UNAVAILABLE, e.details);
      }
      assert.deepEqual(seen[0], {
        kind: "hello",
        nodeName: own.nodeName(),
        jobSetId: seen[0].kind === "hello" ? seen[0].jobSetId : "",
        election: off,
      });
      const last = seen[seen.length - 1];
      assert.ok(last.kind === "goodbye", JSON.stringify(seen));
      assert.equal(last.election.mode, ElectionMode.ELECTION_MODE_OFF);
      assert.ok(last.election.generation > off.generation, JSON.stringify([last, off]));
    },
  );

  conformance(
    "CONF-15",
    "a call without the API token to a guarded coordinator is refused UNAUTHENTICATED",
    async () => {
      const c = await guarded();
      const name = unique("conf15");
      for (const token of [undefined, "wrong-token"]) {
        const client = new Client(c.api, { timeoutMs: 2000, executorId: unique("ts"), token });
        clients.push(client);
        for (const call of [() => client.register([job(name)]), () => client.shouldRun(name, AT)]) {
          const e = await refusal(call());
          assert.equal(e.code, grpc.status.UNAUTHENTICATED, e.message);
          assert.match(e.details, /api\.authToken/);
          assert.equal(e.unreachable, false);
        }
      }
    },
  );

  conformance(
    "CONF-16",
    "a client given the API token is served by a guarded coordinator",
    async () => {
      const c = await guarded();
      const client = new Client(c.api, {
        timeoutMs: 2000,
        executorId: unique("ts"),
        token: "conformance-token",
      });
      clients.push(client);
      const name = unique("conf16");
      await client.register([job(name)]);
      const answer = await client.shouldRun(name, AT);
      assert.equal(answer.verdict, Verdict.VERDICT_RUN);
      assert.equal(answer.reason, Reason.REASON_ELECTION_OFF);
      assert.equal(answer.local, false);
      const stream = client.watch({ timeoutMs: 10_000 });
      try {
        for await (const i of stream) {
          assert.equal(i.kind, "hello", JSON.stringify(i));
          break;
        }
      } finally {
        stream.close();
      }
    },
  );

  conformance(
    "CONF-17",
    "a job whose schedule can never fire registers with a warning",
    async () => {
      const client = clientFor(electionOff);
      const parked = unique("conf17-parked");
      const registration = await client.register([
        job(parked, Policy.CLUSTER_POLICY_LEADER, "0 0 31 2 *"),
        job(unique("conf17")),
      ]);
      assert.equal(registration.warnings.length, 1, JSON.stringify(registration));
      assert.ok(registration.warnings[0].includes(parked), registration.warnings[0]);
      assert.match(registration.warnings[0], /never fires/);
      assert.equal((await client.shouldRun(parked, AT)).verdict, Verdict.VERDICT_RUN);
    },
  );

  conformance(
    "CONF-18",
    "a catch-up question is answered only inside its window, where claims are kept",
    async () => {
      const [leader] = await lease();
      await settledAnswers(unique("conf18-plain"));
      const name = unique("conf18");
      const catchUp = { catchUp: CatchUp.CATCH_UP_ALL, catchUpWindowMs: 600_000 };
      const onLeader = clientFor(leader);
      const e = await refusal(
        onLeader.register([{ ...job(unique("conf18-short")), ...catchUp, catchUpWindowMs: 5_000 }]),
      );
      assert.equal(e.code, grpc.status.INVALID_ARGUMENT);
      assert.ok(e.details.includes("catch_up_window_ms"), e.details);
      await onLeader.register([{ ...job(name), ...catchUp }]);
      const past = (Math.floor(Date.now() / 60_000) - 3) * 60_000;
      const kind = Kind.FIRING_KIND_CATCH_UP;
      const caught = await onLeader.shouldRun(name, past, { kind });
      assert.deepEqual(
        [caught.verdict, caught.reason],
        [Verdict.VERDICT_RUN, Reason.REASON_LEADER],
        JSON.stringify(caught),
      );
      assert.ok(caught.fence, JSON.stringify(caught));
      const old = await onLeader.shouldRun(name, past - 8 * 60_000, { kind });
      assert.deepEqual(
        [old.verdict, old.reason],
        [Verdict.VERDICT_SKIP, Reason.REASON_NOT_CAUGHT_UP],
        JSON.stringify(old),
      );
      const off = clientFor(electionOff);
      await off.register([{ ...job(name), ...catchUp }]);
      const a = await off.shouldRun(name, past, { kind });
      assert.deepEqual(
        [a.verdict, a.reason],
        [Verdict.VERDICT_SKIP, Reason.REASON_NOT_CAUGHT_UP],
        JSON.stringify(a),
      );
    },
  );
});
