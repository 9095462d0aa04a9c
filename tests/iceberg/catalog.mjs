// catalog.mjs - drives the Iceberg catalog (handlers/iceberg) with
// iceberg-js, a client nobody here wrote: namespaces, tables, commits with
// requirements, renames, drops, register, multi-table transactions (plain
// fetch: iceberg-js has no call for them), and two writers racing on one
// table.  Exits 0 when every check holds, else prints what failed and
// exits 1.
//
//   node catalog.mjs BASE_URL ICEBERG_JS_MODULE WAREHOUSE_DIR
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';

const [base, module, warehouse] = process.argv.slice(2);
const { IcebergRestCatalog, IcebergError } = await import(module);
const cat = new IcebergRestCatalog({ baseUrl: base });

// The Iceberg error a call throws: its status and type.
async function fails(call) {
	try {
		await call();
	} catch (e) {
		assert.ok(e instanceof IcebergError, `not an IcebergError: ${e}`);
		return `${e.status} ${e.icebergType}`;
	}
	assert.fail('the call succeeded');
}

const schema = {
	type: 'struct', 'schema-id': 0, fields: [
		{ id: 1, name: 'id', type: 'long', required: true },
		{ id: 2, name: 'amount', type: 'double', required: false },
	],
};
// A snapshot of table metadata meta, its parent the current one.
function snapshot(meta, id) {
	const parent = meta['current-snapshot-id'];
	return {
		'snapshot-id': id,
		...(parent >= 0 ? { 'parent-snapshot-id': parent } : {}),
		'sequence-number': (meta['last-sequence-number'] ?? 0) + 1,
		'timestamp-ms': Date.now(),
		'manifest-list': `${meta.location}/metadata/snap-${id}.avro`,
		summary: { operation: 'append' },
		'schema-id': meta['current-schema-id'],
	};
}
function append(meta, id) {
	const cur = meta['current-snapshot-id'];
	return {
		requirements: [{ type: 'assert-ref-snapshot-id', ref: 'main',
		    'snapshot-id': cur >= 0 ? cur : null }],
		updates: [{ action: 'add-snapshot', snapshot: snapshot(meta, id) },
		    { action: 'set-snapshot-ref', 'ref-name': 'main', type: 'branch',
		      'snapshot-id': id }],
	};
}

// ---------------------------------------------------------- namespaces
await cat.createNamespace({ namespace: ['sales'] },
    { properties: { owner: 'ana' } });
await cat.createNamespace({ namespace: ['sales', 'eu west'] });
await cat.createNamespace({ namespace: ['hr'] });
assert.equal(await fails(() => cat.createNamespace({ namespace: ['sales'] })),
    '409 AlreadyExistsException');
assert.deepEqual((await cat.listNamespaces()).namespaces,
    [{ namespace: ['hr'] }, { namespace: ['sales'] }]);
assert.deepEqual((await cat.listNamespaces({ parent: { namespace: ['sales'] } }))
    .namespaces, [{ namespace: ['sales', 'eu west'] }]);
// paging: one at a time, to the end
let page = await cat.listNamespaces({ pageSize: 1 });
assert.deepEqual(page.namespaces, [{ namespace: ['hr'] }]);
page = await cat.listNamespaces({ pageSize: 1, pageToken: page.nextPageToken });
assert.deepEqual(page.namespaces, [{ namespace: ['sales'] }]);
assert.ok(page.nextPageToken == null, 'no page after the last');
assert.deepEqual(await cat.loadNamespaceMetadata({ namespace: ['sales'] }),
    { properties: { owner: 'ana' } });
assert.equal(await cat.namespaceExists({ namespace: ['sales', 'eu west'] }),
    true);
assert.equal(await cat.namespaceExists({ namespace: ['nope'] }), false);
assert.equal(await fails(() => cat.loadNamespaceMetadata({ namespace: ['nope'] })),
    '404 NoSuchNamespaceException');
assert.deepEqual(await cat.updateNamespaceProperties({ namespace: ['sales'] },
    { removals: ['owner', 'absent'], updates: { tier: 'gold' } }),
    { updated: ['tier'], removed: ['owner'], missing: ['absent'] });
assert.equal(await fails(() => cat.updateNamespaceProperties(
    { namespace: ['sales'] }, { removals: ['a'], updates: { a: '1' } })),
    '422 UnprocessableEntityException');
// a namespace needs its parent; "." and ".." are no names (URLs lose them)
assert.equal(await fails(() => cat.createNamespace({ namespace: ['nope', 'child'] })),
    '404 NoSuchNamespaceException');
assert.equal(await fails(() => cat.createNamespace({ namespace: ['..'] })),
    '400 BadRequestException');

// -------------------------------------------------------------- tables
const orders = { namespace: ['sales'], name: 'orders' };
let meta = await cat.createTable({ namespace: ['sales'] },
    { name: 'orders', schema, properties: { 'write.format.default': 'parquet' } });
assert.equal(meta['format-version'], 2);
assert.match(meta['table-uuid'], /^[0-9a-f-]{36}$/);
assert.ok(meta.location.startsWith(`file://${warehouse}/`), meta.location);
assert.equal(await fails(() => cat.createTable({ namespace: ['sales'] },
    { name: 'orders', schema })), '409 AlreadyExistsException');
assert.equal(await fails(() => cat.createTable({ namespace: ['nope'] },
    { name: 't', schema })), '404 NoSuchNamespaceException');
assert.equal(await fails(() => cat.createTable({ namespace: ['sales'] },
    { name: 'away', schema, location: '/etc/away' })), '400 BadRequestException');
assert.deepEqual((await cat.listTables({ namespace: ['sales'] })).identifiers,
    [orders]);
assert.equal(await cat.tableExists(orders), true);
assert.equal(await cat.tableExists({ namespace: ['sales'], name: 'x' }), false);
let loaded = await cat.loadTableResult(orders);
assert.match(loaded['metadata-location'], /\/metadata\/00000-[0-9a-f-]{36}\.metadata\.json$/);
assert.equal(await cat.loadTableResult(orders, { ifNoneMatch: loaded.etag }),
    null, '304 for an unchanged table');

// a commit with requirements, then one on a stale base: CommitFailed
const c1 = await cat.updateTable(orders, append(meta, 1001));
assert.equal(c1.metadata['current-snapshot-id'], 1001);
assert.match(c1['metadata-location'], /\/00001-/);
assert.equal(await fails(() => cat.updateTable(orders, append(meta, 1002))),
    '409 CommitFailedException');
for (const bad of [{ type: 'assert-table-uuid', uuid: '00000000-0000-0000-0000-000000000000' },
    { type: 'assert-current-schema-id', 'current-schema-id': 7 },
    { type: 'assert-default-spec-id', 'default-spec-id': 3 },
    { type: 'assert-default-sort-order-id', 'default-sort-order-id': 9 },
    { type: 'assert-last-assigned-field-id', 'last-assigned-field-id': 99 },
    { type: 'assert-last-assigned-partition-id', 'last-assigned-partition-id': 5 },
    { type: 'assert-create' }])
	assert.equal(await fails(() => cat.updateTable(orders,
	    { requirements: [bad], updates: [] })), '409 CommitFailedException',
	    bad.type);
assert.equal(await fails(() => cat.updateTable(orders,
    { requirements: [], updates: [{ action: 'no-such-action' }] })),
    '400 BadRequestException');
// the writer's updates
meta = (await cat.updateTable(orders, {
	requirements: [{ type: 'assert-current-schema-id', 'current-schema-id': 0 }],
	updates: [
		{ action: 'add-schema', schema: { ...schema, 'schema-id': 1, fields: [...schema.fields,
		    { id: 3, name: 'note', type: 'string', required: false }] } },
		{ action: 'set-current-schema', 'schema-id': -1 },
		{ action: 'add-spec', spec: { 'spec-id': 1, fields: [{ 'source-id': 1,
		    'field-id': 1000, name: 'id_bucket', transform: 'bucket[4]' }] } },
		{ action: 'set-default-spec', 'spec-id': -1 },
		{ action: 'add-sort-order', 'sort-order': { 'order-id': 1, fields: [
		    { transform: 'identity', 'source-id': 1, direction: 'asc',
		      'null-order': 'nulls-first' }] } },
		{ action: 'set-default-sort-order', 'sort-order-id': -1 },
		{ action: 'set-properties', updates: { owner: 'ana' } },
		{ action: 'remove-properties', removals: ['write.format.default'] },
		{ action: 'set-snapshot-ref', 'ref-name': 'audit', type: 'tag',
		  'snapshot-id': 1001 },
	],
})).metadata;
assert.equal(meta['current-schema-id'], 1);
assert.equal(meta['default-spec-id'], 1);
assert.equal(meta['default-sort-order-id'], 1);
assert.equal(meta.properties.owner, 'ana');
assert.equal(meta.properties['write.format.default'], undefined);
meta = (await cat.updateTable(orders, append(meta, 1002))).metadata;
meta = (await cat.updateTable(orders, { requirements: [], updates: [
	{ action: 'remove-snapshot-ref', 'ref-name': 'audit' },
	{ action: 'remove-snapshots', 'snapshot-ids': [1001] }] })).metadata;
assert.deepEqual(meta.snapshots.map(s => s['snapshot-id']), [1002]);
assert.equal(meta['current-snapshot-id'], 1002);

// two writers from one base: one 200, one 409 CommitFailedException
const other = new IcebergRestCatalog({ baseUrl: base });
const race = await Promise.allSettled([
	cat.updateTable(orders, append(meta, 2001)),
	other.updateTable(orders, append(meta, 2002))]);
assert.equal(race.filter(r => r.status === 'fulfilled').length, 1);
const lost = race.find(r => r.status === 'rejected').reason;
assert.equal(`${lost.status} ${lost.icebergType}`, '409 CommitFailedException');

// a create transaction: stage-create, then a commit with assert-create
const staged = await cat.createTableResult({ namespace: ['sales'] },
    { name: 'staged', schema, 'stage-create': true });
assert.equal(staged['metadata-location'], null);
assert.equal(await cat.tableExists({ namespace: ['sales'], name: 'staged' }),
    false);
const sm = staged.metadata;
await cat.updateTable({ namespace: ['sales'], name: 'staged' }, {
	requirements: [{ type: 'assert-create' }],
	updates: [
		{ action: 'assign-uuid', uuid: sm['table-uuid'] },
		{ action: 'upgrade-format-version', 'format-version': 2 },
		{ action: 'add-schema', schema: sm.schemas[0] },
		{ action: 'set-current-schema', 'schema-id': -1 },
		{ action: 'add-spec', spec: sm['partition-specs'][0] },
		{ action: 'set-default-spec', 'spec-id': -1 },
		{ action: 'add-sort-order', 'sort-order': sm['sort-orders'][0] },
		{ action: 'set-default-sort-order', 'sort-order-id': -1 },
		{ action: 'set-location', location: sm.location },
	],
});
assert.equal(await cat.tableExists({ namespace: ['sales'], name: 'staged' }),
    true);
// create transactions at once: of other tables each lands; of one table
// one lands and the other's assert-create fails
const createTx = (name, m) => new IcebergRestCatalog({ baseUrl: base })
    .updateTable({ namespace: ['sales'], name }, {
	requirements: [{ type: 'assert-create' }],
	updates: [
		{ action: 'assign-uuid', uuid: m['table-uuid'] },
		{ action: 'upgrade-format-version', 'format-version': 2 },
		{ action: 'add-schema', schema: m.schemas[0] },
		{ action: 'set-current-schema', 'schema-id': -1 },
		{ action: 'set-location', location: `${m.location}-${name}` },
	] });
const parallel = await Promise.allSettled([...Array(8).keys()].map(i =>
    createTx(`ct${i}`, sm)));
assert.deepEqual(parallel.filter(r => r.status === 'rejected').map(r =>
    `${r.reason.status} ${r.reason.icebergType}`), []);
const twins = await Promise.allSettled([createTx('ctwin', sm),
    createTx('ctwin', sm)]);
assert.equal(twins.filter(r => r.status === 'fulfilled').length, 1);
const twinLost = twins.find(r => r.status === 'rejected').reason;
assert.equal(`${twinLost.status} ${twinLost.icebergType}`,
    '409 CommitFailedException');

// ------------------------------------- rename, register, transactions
await cat.renameTable({ source: { namespace: ['sales'], name: 'staged' },
    destination: { namespace: ['sales', 'eu west'], name: 'moved' } });
assert.equal(await cat.tableExists({ namespace: ['sales'], name: 'staged' }),
    false);
assert.equal(await cat.tableExists({ namespace: ['sales', 'eu west'],
    name: 'moved' }), true);
assert.equal(await fails(() => cat.renameTable({ source: { namespace: ['sales'],
    name: 'staged' }, destination: { namespace: ['hr'], name: 'x' } })),
    '404 NoSuchTableException');
assert.equal(await fails(() => cat.renameTable({ source: orders,
    destination: { namespace: ['nope'], name: 'x' } })),
    '404 NoSuchNamespaceException');
assert.equal(await fails(() => cat.renameTable({ source: orders,
    destination: { namespace: ['sales', 'eu west'], name: 'moved' } })),
    '409 AlreadyExistsException');

loaded = await cat.loadTableResult(orders);
const reg = await cat.registerTable({ namespace: ['hr'] },
    { name: 'orders_copy', 'metadata-location': loaded['metadata-location'] });
assert.equal(reg['table-uuid'], loaded.metadata['table-uuid']);
assert.equal(await fails(() => cat.registerTable({ namespace: ['hr'] },
    { name: 'orders_copy', 'metadata-location': loaded['metadata-location'] })),
    '409 AlreadyExistsException');
assert.equal(await fails(() => cat.registerTable({ namespace: ['hr'] },
    { name: 'passwd', 'metadata-location': 'file:///etc/passwd' })),
    '400 BadRequestException');

// several tables, all or nothing: a failed requirement changes none
const moved = { namespace: ['sales', 'eu west'], name: 'moved' };
const txn = async body => {
	const r = await fetch(new URL('v1/transactions/commit', base), {
		method: 'POST', body: JSON.stringify(body),
		headers: { 'Content-Type': 'application/json' } });
	return [r.status, r.status === 204 ? null : await r.json()];
};
const om = (await cat.loadTable(orders)), mm = (await cat.loadTable(moved));
let [st, err] = await txn({ 'table-changes': [
	{ identifier: orders, ...append(om, 3001) },
	{ identifier: moved, requirements: [{ type: 'assert-table-uuid',
	    uuid: om['table-uuid'] }], updates: [] }] });
assert.equal(st, 409);
assert.equal(err.error.type, 'CommitFailedException');
assert.equal((await cat.loadTable(orders))['current-snapshot-id'],
    om['current-snapshot-id'], 'a failed transaction changed a table');
[st] = await txn({ 'table-changes': [
	{ identifier: orders, ...append(om, 3001) },
	{ identifier: moved, ...append(mm, 3002) }] });
assert.equal(st, 204);
assert.equal((await cat.loadTable(orders))['current-snapshot-id'], 3001);
assert.equal((await cat.loadTable(moved))['current-snapshot-id'], 3002);

// metrics are accepted
const mr = await fetch(new URL('v1/namespaces/sales/tables/orders/metrics', base),
    { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ 'report-type': 'commit-report', 'table-name': 'orders',
      'snapshot-id': 3001, 'sequence-number': 5, operation: 'append', metrics: {} }) });
assert.equal(mr.status, 204);

// a transaction that fails half way changes nothing: table b's new
// location lies under a file, where no metadata can be written (400)
const path = u => u.replace(/^file:\/\//, '');
writeFileSync(`${path(mm.location)}/plain-file`, 'x');
const before = await cat.loadTable(orders);
[st, err] = await txn({ 'table-changes': [
	{ identifier: orders, requirements: [], updates: [{ action: 'set-properties',
	    updates: { halfway: 'yes' } }] },
	{ identifier: moved, requirements: [], updates: [{ action: 'set-location',
	    location: `${mm.location}/plain-file/sub` }] }] });
assert.equal(st, 400, JSON.stringify(err));
assert.deepEqual((await cat.loadTable(orders)).properties, before.properties);

// many tables made at once in one namespace: each once, none refused
const many = await Promise.allSettled([...Array(16).keys()].map(i =>
    new IcebergRestCatalog({ baseUrl: base }).createTable({ namespace: ['hr'] },
    { name: `t${i}`, schema })));
assert.deepEqual(many.filter(r => r.status === 'rejected').map(r =>
    `${r.reason.status} ${r.reason.icebergType} ${r.reason.message}`), []);
assert.equal((await cat.listTables({ namespace: ['hr'] })).identifiers.length, 17);

// a message cut inside a character stays the error model
const long = await fetch(new URL('v1/namespaces/hr/register', base), {
	method: 'POST', headers: { 'Content-Type': 'application/json' },
	body: JSON.stringify({ name: 'long', 'metadata-location': '/x/' +
	    'é'.repeat(700) }) });
assert.equal(long.status, 400);
assert.equal(long.headers.get('content-type'), 'application/json');
assert.equal((await long.json()).error.type, 'BadRequestException');

// ---------------------------------------------------------------- drops
// a purge keeps the files a table still uses: orders_copy was registered
// from orders' metadata, and dropping it with purge leaves orders whole
const ordersFile = (await cat.loadTableResult(orders))['metadata-location'];
await cat.dropTable({ namespace: ['hr'], name: 'orders_copy' }, { purge: true });
await new Promise(r => setTimeout(r, 1500));
assert.ok(existsSync(path(ordersFile)), 'a purge deleted a live table\'s file');
// a table made where a purged one lay: refused while its files are being
// deleted (503, retried), never deleted after it is made
const gone = await cat.loadTable({ namespace: ['hr'], name: 't0' });
await cat.dropTable({ namespace: ['hr'], name: 't0' }, { purge: true });
let again;
for (let i = 0; !again && i < 50; i++) {
	try {
		again = await cat.createTable({ namespace: ['hr'] },
		    { name: 'again', schema, location: gone.location });
	} catch (e) {
		assert.equal(`${e.status} ${e.icebergType}`,
		    '503 ServiceUnavailableException');
		await new Promise(r => setTimeout(r, 100));
	}
}
await new Promise(r => setTimeout(r, 1500));
const againFile = (await cat.loadTableResult({ namespace: ['hr'],
    name: 'again' }))['metadata-location'];
assert.ok(existsSync(path(againFile)), 'a purge deleted a new table\'s file');
assert.equal(await fails(() => cat.dropNamespace({ namespace: ['sales', 'eu west'] })),
    '409 NamespaceNotEmptyException');
await cat.dropTable(moved, { purge: true });
await cat.dropNamespace({ namespace: ['sales', 'eu west'] });
assert.equal(await fails(() => cat.dropTable(moved)), '404 NoSuchTableException');
assert.equal(await fails(() => cat.dropNamespace({ namespace: ['sales', 'eu west'] })),
    '404 NoSuchNamespaceException');

// a prefix is a catalog of its own; the config hands it out
const cfg = await (await fetch(new URL('v1/config?warehouse=wh2', base))).json();
assert.equal(cfg.overrides.prefix, 'wh2');
assert.match(cfg['idempotency-key-lifetime'], /^PT/);
const wh2 = new IcebergRestCatalog({ baseUrl: base, warehouse: 'wh2' });
assert.deepEqual((await wh2.listNamespaces()).namespaces, []);
await wh2.createNamespace({ namespace: ['sales'] });
assert.deepEqual((await cat.listNamespaces()).namespaces,
    [{ namespace: ['hr'] }, { namespace: ['sales'] }]);

// the framework's own errors in the Iceberg error model
const bad = await fetch(new URL('v1/namespaces', base), { method: 'POST',
    headers: { 'Idempotency-Key': 'not-a-uuid', 'Content-Type': 'application/json' },
    body: JSON.stringify({ namespace: ['k'] }) });
assert.equal(bad.status, 400);
const be = await bad.json();
assert.equal(be.error.code, 400);
assert.equal(be.error.type, 'BadRequestException');
assert.match(be.error.message, /IDEMPOTENCY_KEY_INVALID/);
console.log('catalog: every check held');
