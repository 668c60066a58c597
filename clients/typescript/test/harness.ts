//! Starts real `cronstable coordinator` processes on free loopback ports for the conformance
//! tests, captures their logs, and talks to their HTTP API.
//!
//! The binary comes from CRONSTABLE_BIN (clients/run-tests.sh sets it); without it the suite
//! throws at load, so a CI run cannot pass by testing nothing.

import { ChildProcess, execFileSync, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";

/** How long any wait may take before the test fails; a healthy run is far quicker. */
export const PATIENCE_MS = 30_000;

export function coordinatorBinary(): string {
  const bin = process.env.CRONSTABLE_BIN;
  if (!bin) {
    throw new Error(
      "CRONSTABLE_BIN is not set: point it at the cronstable binary " +
        "(cargo build -p cronstable-coordinator; clients/run-tests.sh does this)",
    );
  }
  try {
    fs.accessSync(bin, fs.constants.X_OK);
  } catch {
    throw new Error(`CRONSTABLE_BIN=${bin} is not an executable file`);
  }
  return bin;
}

/** How often a coordinator start is retried with fresh ports after losing a port race. */
const BIND_ATTEMPTS = 3;

const handedOut = new Set<number>();

/**
 * A port that was free a moment ago: the coordinator's config refuses port 0. Never the same
 * port twice in one run, since the ports of one config are all picked before any is bound.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await anyFreePort();
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}

function anyFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Polls `check` until it returns something other than undefined, or fails naming `what`. */
export async function waitFor<T>(
  what: string,
  check: () => T | undefined | Promise<T | undefined>,
  patienceMs = PATIENCE_MS,
): Promise<T> {
  const deadline = Date.now() + patienceMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${patienceMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface HttpAnswer {
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

/** One coordinator process, killed by `stop`. */
export class Coordinator {
  private logText = "";
  private proc!: ChildProcess;
  private stderrClosed: Promise<unknown> = Promise.resolve();
  api = "";
  webPort = 0;

  private constructor(readonly name: string) {}

  /**
   * Starts a coordinator. `clusterYaml` gives the config's cluster section; it is called
   * again, with fresh ports picked, when a start loses a port race ("Address already in use").
   */
  static async start(
    directory: string,
    name: string,
    clusterYaml: () => string | Promise<string> = () => "",
    apiYaml = "",
  ): Promise<Coordinator> {
    const c = new Coordinator(name);
    for (let attempt = 1; ; attempt++) {
      await c.spawn(directory, await clusterYaml(), apiYaml);
      try {
        await c.waitLog("coordinator listening");
        break;
      } catch (e) {
        c.stop();
        if (attempt === BIND_ATTEMPTS || !c.logText.includes("Address already in use")) throw e;
      }
    }
    try {
      await waitFor(`${name}'s HTTP API`, () => c.http("GET", "/healthz"));
    } catch (e) {
      c.stop();
      throw e;
    }
    return c;
  }

  private async spawn(directory: string, clusterYaml: string, apiYaml = ""): Promise<void> {
    const apiPort = await freePort();
    this.webPort = await freePort();
    this.api = `http://127.0.0.1:${apiPort}`;
    const config = path.join(directory, `${this.name}.yaml`);
    fs.writeFileSync(
      config,
      `api:\n  listen: 127.0.0.1:${apiPort}\n${apiYaml}web:\n  listen: 127.0.0.1:${this.webPort}\n${clusterYaml}`,
    );
    this.logText = "";
    const proc = spawn(coordinatorBinary(), ["coordinator", "--config", config], {
      stdio: ["ignore", "ignore", "pipe"],
      env: { ...process.env, RUST_LOG: "info" },
    });
    this.proc = proc;
    this.stderrClosed = new Promise((resolve) => proc.stderr!.once("close", resolve));
    proc.stderr!.setEncoding("utf8");
    proc.stderr!.on("data", (chunk: string) => {
      if (this.proc === proc) this.logText += chunk;
    });
  }

  log(): string {
    return this.logText;
  }

  async waitLog(needle: string): Promise<void> {
    await waitFor(`coordinator ${this.name} to log ${JSON.stringify(needle)}`, async () => {
      if (this.logText.includes(needle)) return true;
      if (this.proc.exitCode !== null) {
        await this.stderrClosed; // the whole log, up to its last line
        throw new Error(
          `coordinator ${this.name} exited (${this.proc.exitCode}) before logging ${needle}; its log:\n${this.logText}`,
        );
      }
      return undefined;
    }).catch((e: Error) => {
      throw e.message.includes("its log:")
        ? e
        : new Error(`${e.message}; its log:\n${this.logText}`);
    });
  }

  /** Log lines containing every one of `needles`. */
  logLines(...needles: string[]): string[] {
    return this.logText.split("\n").filter((l) => needles.every((n) => l.includes(n)));
  }

  /** The node name announced in the "coordinator listening" line. */
  nodeName(): string {
    for (const line of this.logLines("coordinator listening")) {
      const m = /node="([^"]*)"/.exec(line);
      if (m) return m[1];
    }
    throw new Error(`no node name in the log of ${this.name}:\n${this.logText}`);
  }

  /** Status and JSON body, or undefined while the listener does not answer. */
  async http(method: "GET" | "POST", urlPath: string): Promise<HttpAnswer | undefined> {
    try {
      const r = await fetch(`http://127.0.0.1:${this.webPort}${urlPath}`, {
        method,
        signal: AbortSignal.timeout(2000),
      });
      const text = await r.text();
      return { status: r.status, body: text ? JSON.parse(text) : {} };
    } catch {
      return undefined;
    }
  }

  /** Stops it gracefully (SIGTERM), as a service manager would; resolves to its exit code. */
  async terminate(): Promise<number | null> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      const exited = new Promise((resolve) => this.proc.once("exit", resolve));
      this.proc.kill("SIGTERM");
      await exited;
    }
    await this.stderrClosed;
    return this.proc.exitCode;
  }

  stop(): void {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill("SIGKILL");
  }
}

/** The cluster section of a filesystem-lease coordinator named `name` on `store`. */
export function leaseYaml(name: string, store: string): string {
  return (
    `cluster:\n  nodeName: ${name}\n  backend: filesystem\n` +
    `  filesystem:\n    path: ${store}\n    ttl: 3\n    topology: single-node\n`
  );
}

const GOSSIP_CERTS = path.resolve(__dirname, "..", "..", "..", "conformance", "gossip-certs.sh");

/**
 * The cluster section of gossip node n1 in a three-node cluster whose two other members do not
 * exist (nothing listens on their ports), so it never sees a quorum.
 */
export async function lonelyGossipYaml(directory: string): Promise<string> {
  const tls = path.join(directory, "tls");
  execFileSync(GOSSIP_CERTS, [tls, "n1", "127.0.0.1"], { stdio: ["ignore", "inherit", "inherit"] });
  let peers = "";
  for (let i = 0; i < 2; i++) peers += `    - host: "127.0.0.1:${await freePort()}"\n`;
  return (
    "cluster:\n  nodeName: n1\n  electLeader: true\n  interval: 1s\n  connectTimeout: 1s\n" +
    `  listen: "127.0.0.1:${await freePort()}"\n` +
    `  tls:\n    ca: ${tls}/ca.pem\n    cert: ${tls}/n1.pem\n    key: ${tls}/n1-key.pem\n` +
    `  peers:\n${peers}`
  );
}
