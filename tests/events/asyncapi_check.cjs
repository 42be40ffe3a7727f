// docs/events/asyncapi.yaml read by the real AsyncAPI parser (@asyncapi/parser, which validates the
// document against the AsyncAPI 3.0 specification and resolves every $ref, the payload schemas in
// schemas/events included), then held to the contract: the topic, the key, the CloudEvents headers, and
// one message per event type whose payload is exactly the schema file of that type; headers and the
// structured envelope open to additions, as the payload schemas are; and the operation's x-delivery.gaps,
// the one statement about gaps in a charge's sequence, word for word in the document's description and in
// docs/events.md ("Delivery guarantees").
//
//   node asyncapi_check.cjs <parser install dir> <schemas/events dir> <events.md> <asyncapi.yaml> [--broken <copy>...]
// Prints every diagnostic and problem. Exits 0 when the document passes and every copy after --broken
// fails (a check that cannot fail proves nothing); 1 otherwise. One process for all: loading the parser
// is most of the time.
'use strict';
const fs = require('fs');
const path = require('path');

const [parserDir, schemasDir, eventsMd, documentPath, flag, ...brokenCopies] = process.argv.slice(2);
if (!parserDir || !schemasDir || !eventsMd || !documentPath || (flag !== undefined && flag !== '--broken')) {
  console.error('usage: asyncapi_check.cjs <parser dir> <schemas dir> <events.md> <asyncapi.yaml> [--broken <copy>...]');
  process.exit(2);
}
// Text compared across Markdown and YAML: line breaks and indentation are layout, not words.
const words = (text) => String(text).replace(/\s+/g, ' ').trim();
const contract = words(fs.readFileSync(eventsMd, 'utf8'));
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

  // One statement about gaps, in the three places a consumer reads it.
  const delivery = operation && operation.extensions().get('x-delivery');
  const gaps = delivery && delivery.value() && delivery.value().gaps;
  if (!gaps || words(gaps).length < 200) {
    problems.push('x-delivery.gaps is missing or too short to say when a gap is seen and what to do');
  } else {
    expect(contract.includes(words(gaps)), `x-delivery.gaps is not word for word in ${eventsMd}`);
    const info = document.info().description() || '';
    expect(words(info).includes(words(gaps)), 'x-delivery.gaps is not word for word in info.description');
  }

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
    expect(!text.includes('"additionalProperties":false'), `${type}: headers closed to additions`);
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
  const envelope = structured && structured.payload() && structured.payload().json();
  expect(envelope && envelope.additionalProperties === true, 'structured: the envelope is not open to additions');
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
