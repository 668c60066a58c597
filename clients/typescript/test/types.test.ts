//! Unit tests of the client's own conversions, no coordinator needed: instants, unknown enum
//! values, and the no-manager table the client applies by itself.

import assert from "node:assert/strict";
import { test } from "node:test";

import { ElectionMode, Kind, Policy, Reason, Verdict, noManagerAnswer, toMs } from "../src";
import { answerFromWire, stampFromWire } from "../src/types";

test("instants convert to exact milliseconds and bad ones are refused", () => {
  assert.equal(toMs(new Date("2026-12-03T10:00:00.123Z")), 1_796_292_000_123);
  assert.equal(toMs(42), 42);
  assert.throws(() => toMs(1.5), TypeError);
  assert.throws(() => toMs(new Date("not a date")), TypeError);
});

test("an unknown reason reads as unspecified", () => {
  const a = answerFromWire({
    verdict: Verdict.VERDICT_RUN,
    reason: 999 as Reason,
    message: "from the future",
    owner: "",
    retryAfterMs: 0,
    firingId: "",
    nodeName: "",
    election: undefined,
  });
  assert.deepEqual(
    [a.verdict, a.reason, a.run, a.fence],
    [Verdict.VERDICT_RUN, Reason.REASON_UNSPECIFIED, true, undefined],
  );
});

test("an older coordinator's missing election stamp, or a future mode, reads as unknown", () => {
  const unknown = { mode: ElectionMode.ELECTION_MODE_UNSPECIFIED, generation: 0 };
  assert.deepEqual(stampFromWire(undefined), unknown);
  assert.deepEqual(stampFromWire({ mode: 7 as ElectionMode, generation: 5 }), {
    mode: ElectionMode.ELECTION_MODE_UNSPECIFIED,
    generation: 5,
  });
  assert.deepEqual(stampFromWire({ mode: ElectionMode.ELECTION_MODE_OFF, generation: 5 }), {
    mode: ElectionMode.ELECTION_MODE_OFF,
    generation: 5,
  });
});

test("the no-manager table", () => {
  const rows: [Policy, Kind, Verdict, Reason][] = [
    [
      Policy.CLUSTER_POLICY_LEADER,
      Kind.FIRING_KIND_SCHEDULED,
      Verdict.VERDICT_SKIP,
      Reason.REASON_COORDINATOR_UNREACHABLE,
    ],
    [
      Policy.CLUSTER_POLICY_UNSPECIFIED,
      Kind.FIRING_KIND_SCHEDULED,
      Verdict.VERDICT_SKIP,
      Reason.REASON_COORDINATOR_UNREACHABLE,
    ],
    [
      Policy.CLUSTER_POLICY_LEADER,
      Kind.FIRING_KIND_RETRY,
      Verdict.VERDICT_SKIP,
      Reason.REASON_COORDINATOR_UNREACHABLE,
    ],
    [
      Policy.CLUSTER_POLICY_PREFER_LEADER,
      Kind.FIRING_KIND_REBOOT,
      Verdict.VERDICT_RUN,
      Reason.REASON_NO_MANAGER,
    ],
    [
      Policy.CLUSTER_POLICY_EVERY_NODE,
      Kind.FIRING_KIND_SCHEDULED,
      Verdict.VERDICT_RUN,
      Reason.REASON_EVERY_NODE,
    ],
    [
      Policy.CLUSTER_POLICY_LEADER,
      Kind.FIRING_KIND_MANUAL,
      Verdict.VERDICT_RUN,
      Reason.REASON_MANUAL,
    ],
  ];
  for (const [policy, kind, verdict, reason] of rows) {
    const a = noManagerAnswer(policy, kind, "no answer");
    assert.deepEqual(
      [a.verdict, a.reason, a.local],
      [verdict, reason, true],
      `${Policy[policy]} ${Kind[kind]}`,
    );
  }
});
