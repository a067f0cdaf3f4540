// SCRAM authentication through the official Node.js driver against a server
// started with --auth (tests/compat/test_auth_clients.py sets it up: an
// `admin` root user on admin, a `reader` user with `read` on `app`, and a
// `sha1only` user on admin whose only mechanism is SCRAM-SHA-1).
//
//   node auth.mjs <host> <admin password>
//
// <host> is what goes between `@` and `/` in the URI: `127.0.0.1:27018` or a
// percent-encoded Unix socket path (`%2Ftmp%2Fbisondb-27018.sock`). Exits
// non-zero with a message on the first mismatch; prints
// "auth.mjs: all checks passed" when everything matched.
import { MongoClient } from 'mongodb';
import { counter, expectEqual } from './check.mjs';

const [host, adminPassword] = process.argv.slice(2);
if (!host || !adminPassword) {
  console.error('usage: node auth.mjs <host> <admin password>');
  process.exit(2);
}


function uri(user, password, params) {
  const query = new URLSearchParams({ serverSelectionTimeoutMS: '10000', ...params });
  return `mongodb://${encodeURIComponent(user)}:${encodeURIComponent(password)}@${host}/?${query}`;
}

// Runs `body` with a connected client and always closes it.
async function withClient(u, body) {
  const client = new MongoClient(u);
  try {
    await client.connect();
    return await body(client);
  } finally {
    await client.close();
  }
}

// The server error code `action` fails with (the driver may wrap an
// authentication failure in its own error, with the server's as `cause`).
async function failureCode(action, what) {
  try {
    await action();
  } catch (e) {
    const code = e.code ?? e.cause?.code;
    return { code, codeName: e.codeName ?? e.cause?.codeName, message: String(e.message) };
  }
  throw new Error(`${what}: expected a failure, the command succeeded`);
}

async function main() {
  for (const mech of ['SCRAM-SHA-256', 'SCRAM-SHA-1']) {
    // The root user, each mechanism asked for explicitly.
    await withClient(uri('admin', adminPassword, { authSource: 'admin', authMechanism: mech }), async (c) => {
      const status = await c.db('admin').command({ connectionStatus: 1 });
      expectEqual(status.authInfo.authenticatedUsers, [{ user: 'admin', db: 'admin' }], `${mech}: connectionStatus users`);
      const names = (await c.db('admin').command({ listDatabases: 1, nameOnly: true })).databases.map((d) => d.name);
      expectEqual(names.includes('app'), true, `${mech}: root sees database app`);
      const items = c.db('node_auth').collection('items');
      await items.deleteMany({});
      await items.insertOne({ _id: mech, via: host });
      expectEqual(await items.findOne({ _id: mech }), { _id: mech, via: host }, `${mech}: root writes and reads back`);
    });

    // The `read` user on app: its find returns the seeded data; writes and
    // other databases get 13 Unauthorized.
    await withClient(uri('reader', 'r3ad:only@', { authSource: 'app', authMechanism: mech }), async (c) => {
      const docs = await c.db('app').collection('c').find({}).sort({ _id: 1 }).toArray();
      expectEqual(docs, [{ _id: 1, v: 'one' }, { _id: 2, v: 'two' }], `${mech}: reader's find`);
      const insert = await failureCode(() => c.db('app').collection('c').insertOne({ _id: 3 }), `${mech}: reader insert`);
      expectEqual([insert.code, insert.codeName], [13, 'Unauthorized'], `${mech}: reader insert refused`);
      const other = await failureCode(() => c.db('other').collection('c').findOne({}), `${mech}: reader find on other`);
      expectEqual([other.code, other.codeName], [13, 'Unauthorized'], `${mech}: reader find on other refused`);
      const dbs = (await c.db('admin').command({ listDatabases: 1, nameOnly: true })).databases.map((d) => d.name);
      expectEqual(dbs, ['app'], `${mech}: reader lists only app`);
    });

    // A wrong password: 18 AuthenticationFailed, nothing runs.
    const wrong = await failureCode(
      () => withClient(uri('admin', 'not-the-password', { authSource: 'admin', authMechanism: mech }),
        (c) => c.db('admin').command({ ping: 1 })),
      `${mech}: wrong password`);
    expectEqual([wrong.code, wrong.codeName], [18, 'AuthenticationFailed'], `${mech}: wrong password code`);
    expectEqual(wrong.message.includes('Authentication failed.'), true, `${mech}: wrong password message`);
    // An unknown user fails exactly alike (no user enumeration).
    const ghost = await failureCode(
      () => withClient(uri('ghost', adminPassword, { authSource: 'admin', authMechanism: mech }),
        (c) => c.db('admin').command({ ping: 1 })),
      `${mech}: unknown user`);
    expectEqual([ghost.code, ghost.codeName], [18, 'AuthenticationFailed'], `${mech}: unknown user code`);
  }

  // The driver's default negotiation (saslSupportedMechs in the handshake):
  // SCRAM-SHA-256 for a user that has it, SCRAM-SHA-1 for one that only has
  // SHA-1; asking SHA-256 of the SHA-1-only user fails as on mongod, with 334
  // MechanismUnavailable.
  await withClient(uri('sha1only', 'legacy-pw', { authSource: 'admin' }), async (c) => {
    const status = await c.db('admin').command({ connectionStatus: 1 });
    expectEqual(status.authInfo.authenticatedUsers, [{ user: 'sha1only', db: 'admin' }], 'negotiated SHA-1 user');
    const docs = await c.db('app').collection('c').find({ _id: 2 }).toArray();
    expectEqual(docs, [{ _id: 2, v: 'two' }], 'SHA-1-only user reads app');
  });
  const sha256OfSha1 = await failureCode(
    () => withClient(uri('sha1only', 'legacy-pw', { authSource: 'admin', authMechanism: 'SCRAM-SHA-256' }),
      (c) => c.db('admin').command({ ping: 1 })),
    'SHA-256 for a SHA-1-only user');
  expectEqual([sha256OfSha1.code, sha256OfSha1.codeName], [334, 'MechanismUnavailable'],
    'SHA-256 for a SHA-1-only user code');
  expectEqual(sha256OfSha1.message.includes('without any SCRAM-SHA-256 credentials registered'), true,
    'SHA-256 for a SHA-1-only user message');

  // Without credentials: the handshake works, a find gets 13.
  const anon = new MongoClient(`mongodb://${host}/?serverSelectionTimeoutMS=10000`);
  try {
    await anon.connect();
    expectEqual((await anon.db('admin').command({ ping: 1 })).ok, 1, 'unauthenticated ping');
    const find = await failureCode(() => anon.db('app').collection('c').findOne({}), 'unauthenticated find');
    expectEqual([find.code, find.codeName], [13, 'Unauthorized'], 'unauthenticated find refused');
  } finally {
    await anon.close();
  }

  console.log(`auth.mjs: all checks passed (${counter.checks} checks, ${host})`);
}

main().catch((err) => {
  console.error(`auth.mjs: FAILED after ${counter.checks} checks: ${err && err.stack ? err.stack : err}`);
  process.exit(1);
});
