// Sequential lock cycles (acquire, then release) with one node.js Redlock client, for
// scripts/bench-node.sh: the same measure as the sequential phase of `redlock-cli bench`.
//
//   node bench.mjs CLIENT --nodes HOST:PORT,... --seconds S --modules DIR
//
// CLIENT: redlock (node-redlock 4), sesamecare (@sesamecare-oss/redlock), universal
// (redlock-universal over ioredis) or universal-redis (redlock-universal over node-redis).
// DIR holds the node_modules that bench-node.sh installed (kept outside the checkout).
// Prints one JSON line. Settings follow redlock-cli's defaults where the library has them:
// one connection per node (independent masters), ttl 10 s, drift factor 0.01, no retry (a retry
// would measure its sleep), every cycle on the same resource, as redlock-cli's sequential phase.
// Per-command timeouts are left at each library's default: ioredis's commandTimeout would arm a
// timer per command, a cost redlock-cli's --node-timeout does not have in this form.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';

const TTL_MS = 10000;
const WARMUP_MS = 500;

function parseArgs(argv) {
  const args = { client: argv[0], nodes: '', seconds: 3, modules: process.env.NODE_BENCH_MODULES };
  for (let i = 1; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag}: needs a value`);
    if (flag === '--nodes') args.nodes = value;
    else if (flag === '--seconds') args.seconds = Number(value);
    else if (flag === '--modules') args.modules = value;
    else throw new Error(`unknown option ${flag}`);
  }
  if (!args.modules) throw new Error('--modules DIR (or NODE_BENCH_MODULES) is required');
  if (!(args.seconds > 0)) throw new Error('--seconds: must be a positive number');
  args.nodes = args.nodes.split(',').filter(Boolean).map((n) => {
    const colon = n.lastIndexOf(':');
    return { host: n.slice(0, colon), port: Number(n.slice(colon + 1)) };
  });
  if (args.nodes.length === 0) throw new Error('--nodes HOST:PORT,... is required');
  return args;
}

// Each client: its package, the Redis client under it, and setup() returning
// { acquire(), release(lock), close() }; acquire and release reject on failure.
const clients = {
  redlock: {
    pkg: 'redlock',
    redis: 'ioredis',
    async setup(need, nodes, resource) {
      const Redis = need('ioredis');
      const Redlock = need('redlock');
      const conns = nodes.map((n) => new Redis(n));
      const redlock = new Redlock(conns, { driftFactor: 0.01, retryCount: 0 });
      redlock.on('clientError', () => {});  // a failed vote shows as a failed cycle
      return {
        acquire: () => redlock.lock(resource, TTL_MS),
        release: (lock) => lock.unlock(),
        close: () => Promise.all(conns.map((c) => c.quit())),
      };
    },
  },
  sesamecare: {
    pkg: '@sesamecare-oss/redlock',
    redis: 'ioredis',
    async setup(need, nodes, resource) {
      const Redis = need('ioredis');
      const { Redlock } = need('@sesamecare-oss/redlock');
      const conns = nodes.map((n) => new Redis(n));
      const redlock = new Redlock(conns, { driftFactor: 0.01, retryCount: 0 });
      redlock.on('error', () => {});  // unhandled, an 'error' event would end the process
      return {
        acquire: () => redlock.acquire([resource], TTL_MS),
        release: (lock) => lock.release(),
        close: () => Promise.all(conns.map((c) => c.quit())),
      };
    },
  },
  universal: {
    pkg: 'redlock-universal',
    redis: 'ioredis',
    async setup(need, nodes, resource) {
      const Redis = need('ioredis');
      const { createRedlock, IoredisAdapter } = need('redlock-universal');
      const conns = nodes.map((n) => new Redis(n));
      const adapters = conns.map((c) => new IoredisAdapter(c));
      return { ...universalLock(createRedlock, adapters, resource),
               close: () => Promise.all(conns.map((c) => c.quit())) };
    },
  },
  'universal-redis': {
    pkg: 'redlock-universal',
    redis: 'redis',
    async setup(need, nodes, resource) {
      const { createClient } = need('redis');
      const { createRedlock, NodeRedisAdapter } = need('redlock-universal');
      const conns = nodes.map((n) => createClient({ socket: n }));
      await Promise.all(conns.map((c) => c.connect()));
      const adapters = conns.map((c) => new NodeRedisAdapter(c));
      return { ...universalLock(createRedlock, adapters, resource),
               close: () => Promise.all(conns.map((c) => c.close())) };
    },
  },
};

// redlock-universal: one lock object per resource; release() resolves false without a quorum.
function universalLock(createRedlock, adapters, resource) {
  const lock = createRedlock({ adapters, key: resource, ttl: TTL_MS, retryAttempts: 0,
                               clockDriftFactor: 0.01 });
  return {
    acquire: () => lock.acquire(),
    release: async (handle) => {
      if (!(await lock.release(handle))) throw new Error('release: no quorum');
    },
  };
}

// Nearest rank, as redlock-cli reports: every figure is a latency that was observed.
function rank(sorted, q) {
  if (sorted.length === 0) return null;
  const i = Math.min(Math.max(Math.ceil(q * sorted.length), 1), sorted.length);
  return Math.round(sorted[i - 1] * 10) / 10;
}

// Cycles until the deadline; the durations (us) of those whose acquire and release succeeded.
async function cycles(lib, seconds) {
  const us = [];
  let errors = 0;
  let firstError = null;
  const end = process.hrtime.bigint() + BigInt(Math.round(seconds * 1e9));
  for (let t0 = process.hrtime.bigint(); t0 < end; t0 = process.hrtime.bigint()) {
    try {
      const lock = await lib.acquire();
      await lib.release(lock);
      us.push(Number(process.hrtime.bigint() - t0) / 1000);
    } catch (e) {
      errors++;
      firstError ??= String(e?.message ?? e);
    }
  }
  return { us, errors, firstError };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const client = clients[args.client];
  if (!client) throw new Error(`unknown client '${args.client}' (${Object.keys(clients).join(', ')})`);
  const need = createRequire(join(args.modules, 'node_modules', '.bench.cjs'));
  const version = (pkg) =>
    JSON.parse(readFileSync(join(args.modules, 'node_modules', pkg, 'package.json'))).version;
  const resource = `nodebench-${randomBytes(8).toString('hex')}:seq`;
  const lib = await client.setup(need, args.nodes, resource);

  // Warm-up, not measured: connections open, scripts loaded, the code compiled.
  await cycles(lib, WARMUP_MS / 1000);
  const run = await cycles(lib, args.seconds);
  await lib.close();

  const sorted = run.us.sort((a, b) => a - b);
  const out = {
    client: args.client,
    package: client.pkg,
    version: version(client.pkg),
    redis_client: `${client.redis} ${version(client.redis)}`,
    cycles: sorted.length,
    cycle_us_p50: rank(sorted, 0.5),
    cycle_us_p99: rank(sorted, 0.99),
    errors: run.errors,
  };
  if (run.firstError) out.first_error = run.firstError;
  console.log(JSON.stringify(out));
  return sorted.length > 0 ? 0 : 1;
}

main().then(
  (rc) => process.exit(rc),
  (e) => {
    console.error(`bench.mjs: ${e?.stack ?? e}`);
    process.exit(2);
  },
);
