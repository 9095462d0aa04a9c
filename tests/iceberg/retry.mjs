// retry.mjs - an iceberg-js client that retries as the Iceberg spec tells
// clients to: a keyed request is sent again with the same key (iceberg-js
// makes it, the fetch below resends the request as it was) after a lost
// answer, a 5xx, or a 409 with Retry-After (the key in flight).  Each
// operation's first attempt meets a fault: its answer dropped, a duplicate
// sent beside it, or (FAULTS=1, durable stores) the worker killed at a
// point of the protocol or its database connection cut
// (X-Idemfcgi-Fault).  Every create, commit, rename and drop must report
// success exactly once, never AlreadyExists, CommitFailed or NoSuchTable
// for its own earlier attempt, and the catalog must end as the operations
// reported.  Exits 0 when every check holds, else 1.
//
//   node retry.mjs BASE_URL ICEBERG_JS_MODULE ROUNDS [FAULTS]
import assert from 'node:assert/strict';

const [base, module, roundsArg, faultsArg] = process.argv.slice(2);
const { IcebergRestCatalog } = await import(module);
const rounds = Number(roundsArg);
// what can happen to a first attempt
const faults = ['none', 'drop-answer', 'duplicate'];
if (faultsArg === '1')
	faults.push('after-handler', 'after-record', 'in-commit',
	    'lose-before-commit', 'lose-in-commit');
const sleep = ms => new Promise(r => setTimeout(r, ms));
const seen = {};        // fault -> count
let retries = 0;

// Sends a request until it has a final answer: a network error, a 5xx or
// a 409 with Retry-After is sent again as it was (same key); so is any
// keyed request whose answer the fault dropped.  Reads without a key are
// retried on 5xx too (they change nothing).
function retryingFetch(plan) {
	return async (url, init = {}) => {
		const headers = new Headers(init.headers);
		const keyed = headers.has('Idempotency-Key');
		let fault = keyed ? plan.shift() ?? 'none' : 'none';
		seen[fault] = (seen[fault] ?? 0) + 1;
		for (let attempt = 0; attempt < 200; attempt++) {
			const h = new Headers(headers);
			if (attempt === 0 && !['none', 'drop-answer', 'duplicate']
			    .includes(fault))
				h.set('X-Idemfcgi-Fault', fault);
			let res;
			try {
				const send = fetch(url, { ...init, headers: h });
				if (attempt === 0 && fault === 'duplicate') {
					// the same request twice at once: one
					// runs, the other waits, is told 409 in
					// flight, or gets the replay
					const twin = fetch(url, { ...init, headers: h });
					const [a, b] = await Promise.all([send, twin]);
					const other = a.status === 409 &&
					    a.headers.get('Retry-After') ? a : b;
					res = other === a ? b : a;
					await other.text();
				} else {
					res = await send;
				}
			} catch (e) {
				retries++;
				await sleep(50);
				continue;
			}
			const again = res.status >= 500 || (res.status === 409 &&
			    res.headers.get('Retry-After') !== null) ||
			    (attempt === 0 && fault === 'drop-answer');
			if (again && (keyed || res.status >= 500)) {
				const wait = Number(res.headers.get('Retry-After') ?? 0);
				await res.text();
				retries++;
				await sleep(Math.min(wait * 1000, 1000) || 50);
				continue;
			}
			return res;
		}
		throw new Error(`no final answer for ${init.method} ${url}`);
	};
}

const plan = [];
const cat = new IcebergRestCatalog({ baseUrl: base, fetch: retryingFetch(plan) });
const pick = i => faults[i % faults.length];
const schema = { type: 'struct', 'schema-id': 0, fields: [
	{ id: 1, name: 'id', type: 'long', required: true }] };
function append(meta, id) {
	const cur = meta['current-snapshot-id'];
	return {
		requirements: [{ type: 'assert-ref-snapshot-id', ref: 'main',
		    'snapshot-id': cur >= 0 ? cur : null }],
		updates: [{ action: 'add-snapshot', snapshot: {
			'snapshot-id': id, ...(cur >= 0 ? { 'parent-snapshot-id': cur } : {}),
			'sequence-number': (meta['last-sequence-number'] ?? 0) + 1,
			'timestamp-ms': Date.now(), summary: { operation: 'append' },
			'manifest-list': `${meta.location}/metadata/snap-${id}.avro`,
			'schema-id': 0 } },
		    { action: 'set-snapshot-ref', 'ref-name': 'main', type: 'branch',
		      'snapshot-id': id }],
	};
}

// Runs op with the fault f on its keyed request; any error fails the test.
let step = 0;
async function run(what, op) {
	plan.push(pick(step++));
	try {
		return await op();
	} catch (e) {
		assert.fail(`${what} (fault ${plan[0] ?? pick(step - 1)}): ` +
		    `${e.status ?? ''} ${e.icebergType ?? ''} ${e.message}`);
	}
}

const expect = { namespaces: new Set(), tables: new Map() };
for (let r = 0; r < rounds; r++) {
	const ns = [`r${r}`];
	await run(`create namespace ${ns}`, () => cat.createNamespace({ namespace: ns }));
	const ident = { namespace: ns, name: 't' };
	let meta = await run('create table', () => cat.createTable({ namespace: ns },
	    { name: 't', schema }));
	let snaps = 0;
	for (let c = 0; c < 3; c++) {
		meta = (await run('commit', () => cat.updateTable(ident,
		    append(meta, r * 100 + c + 1)))).metadata;
		snaps++;
	}
	await run('rename', () => cat.renameTable({ source: ident,
	    destination: { namespace: ns, name: 'u' } }));
	if (r % 2 === 0) {
		await run('drop table', () => cat.dropTable({ namespace: ns, name: 'u' }));
		await run('drop namespace', () => cat.dropNamespace({ namespace: ns }));
	} else {
		await run('properties', () => cat.updateNamespaceProperties(
		    { namespace: ns }, { updates: { round: String(r) } }));
		expect.namespaces.add(ns[0]);
		expect.tables.set(ns[0], { name: 'u', snaps, last: r * 100 + 3 });
	}
}

// the catalog as the operations reported it
const check = new IcebergRestCatalog({ baseUrl: base, fetch: retryingFetch([]) });
const names = (await check.listNamespaces()).namespaces.map(n => n.namespace[0])
    .filter(n => /^r\d+$/.test(n)).sort();
assert.deepEqual(names, [...expect.namespaces].sort());
for (const [ns, t] of expect.tables) {
	const ids = (await check.listTables({ namespace: [ns] })).identifiers;
	assert.deepEqual(ids, [{ namespace: [ns], name: t.name }]);
	const m = await check.loadTable({ namespace: [ns], name: t.name });
	assert.equal(m.snapshots.length, t.snaps, `${ns}: each commit once`);
	assert.equal(m['current-snapshot-id'], t.last);
	assert.deepEqual((await check.loadNamespaceMetadata({ namespace: [ns] }))
	    .properties, { round: ns.slice(1) });
}
console.log(`retry: ${step} operations, faults ${JSON.stringify(seen)}, ` +
    `${retries} retries: every one succeeded once`);
