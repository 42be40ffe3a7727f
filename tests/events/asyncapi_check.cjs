// docs/events/asyncapi.yaml read by the real AsyncAPI parser (@asyncapi/parser, which validates the
// document against the AsyncAPI 3.0 specification and resolves every $ref, the payload schemas in
// schemas/events included), then held to the contract: the topic, the key, the CloudEvents headers, and
// one message per event type whose payload is exactly the schema file of that type.
//
//   node asyncapi_check.cjs <parser install dir> <schemas/events dir> <asyncapi.yaml> [--broken <copy>...]
// Prints every diagnostic and problem. Exits 0 when the document passes and every copy after --broken
// fails (a check that cannot fail proves nothing); 1 otherwise. One process for all: loading the parser
// is most of the time.
'use strict';
const fs = require('fs');
const path = require('path');

const [parserDir, schemasDir, documentPath, flag, ...brokenCopies] = process.argv.slice(2);
if (!parserDir || !schemasDir || !documentPath || (flag !== undefined && flag !== '--broken')) {
  console.error('usage: asyncapi_check.cjs <parser dir> <schemas dir> <asyncapi.yaml> [--broken <copy>...]');
  process.exit(2);
}
const { Parser, fromFile } = require(path.join(parserDir, 'node_modules', '@asyncapi', 'parser'));

const severities = ['error', 'warning', 'info', 'hint'];

// The problems of one document (empty: it passes).
async function check(parser, documentPath) {
  const problems = [];
  const expect = (ok, what) => {
    if (!ok) problems.push(what);
  };
  const { document, diagnostics } = await fromFile(parser, documentPath).parse();
  for (const d of diagnostics) {
    console.log(`  ${severities[d.severity]} ${d.code} at ${d.path.join('.') || '(root)'}: ${d.message}`);
    if (d.severity === 0) problems.push(`parser: ${d.code}: ${d.message}`);
  }
  if (!document) return problems.concat(['the parser produced no document']);
  expect(document.version() === '3.0.0', `asyncapi version ${document.version()}, expected 3.0.0`);

  const channel = document.channels().get('chargeEvents');
  expect(channel && channel.address() === 'charge-events', 'no channel with address charge-events');
  const operation = document.operations().get('publishChargeEvents');
  expect(operation && operation.isSend(), 'no send operation publishChargeEvents');

  // One typed message per schema file, its payload that very schema, its headers the binary-mode ones.
  const types = fs.readdirSync(schemasDir).filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -5)).sort();
  expect(types.length > 0, `no schemas in ${schemasDir}`);
  const messages = new Map(channel ? channel.messages().all().map((m) => [m.name(), m]) : []);
  for (const type of types) {
    const file = JSON.parse(fs.readFileSync(path.join(schemasDir, `${type}.json`), 'utf8'));
    const m = messages.get(type);
    if (!m) {
      problems.push(`no message named ${type} on the channel`);
      continue;
    }
    const payload = m.payload() && m.payload().json();
    expect(payload && payload.$id === file.$id, `${type}: payload is not ${file.$id}`);
    expect(m.contentType() === 'application/json', `${type}: content type ${m.contentType()}`);
    const headers = m.headers() && m.headers().json();
    const text = JSON.stringify(headers || {});
    for (const h of ['ce_specversion', 'ce_id', 'ce_source', 'ce_type', 'ce_time', 'ce_subject', 'ce_dataschema',
                     'content-type', 'traceparent']) {
      expect(text.includes(`"${h}"`), `${type}: header ${h} is not described`);
    }
    expect(text.includes(`"const":"${type}"`), `${type}: ce_type is not fixed to ${type}`);
    expect(text.includes(`"const":"${file.$id}"`), `${type}: ce_dataschema is not fixed to ${file.$id}`);
    const kafka = m.bindings().get('kafka');
    const key = kafka && kafka.value() && kafka.value().key;
    expect(key && key.pattern === '^ch_[0-9a-f]{32}$', `${type}: the Kafka key is not the charge id`);
    expect(m.hasCorrelationId() && m.correlationId().location() === '$message.header#/traceparent',
           `${type}: traceparent is not its correlation id`);
    messages.delete(type);
  }
  const structured = messages.get('structured');
  expect(structured && structured.contentType() === 'application/cloudevents+json',
         'no structured-mode message (application/cloudevents+json)');
  messages.delete('structured');
  for (const name of messages.keys()) problems.push(`message ${name} has no schema file in ${schemasDir}`);
  return problems;
}

(async () => {
  const parser = new Parser();
  let ok = true;
  console.log(documentPath);
  const problems = await check(parser, documentPath);
  for (const p of problems) console.log(`  FAIL: ${p}`);
  if (problems.length) ok = false;
  for (const copy of brokenCopies) {
    console.log(`${copy} (must fail)`);
    const found = await check(parser, copy);
    if (found.length) {
      console.log(`  fails, as it must: ${found[0]}`);
    } else {
      console.log('  FAIL: a broken copy passed');
      ok = false;
    }
  }
  console.log(ok ? 'ok' : 'FAILED');
  process.exit(ok ? 0 : 1);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
