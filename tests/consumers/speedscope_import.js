#!/usr/bin/env node
// speedscope_import.js - feeds a file to speedscope's own importer (the npm package's
// release bundle, the code the speedscope web app and its CLI run) under node, and prints
// what speedscope made of it as JSON: the importer it chose, and per profile its name,
// unit, total weight and per-frame self and total weights.
//
//   node speedscope_import.js FILE            import, print the summary
//   node speedscope_import.js --schema FILE   validate FILE against the file-format schema
//                                             shipped in the package (ajv, draft-07)
//
// The bundle is a browser script: it is run in a vm context with the few globals its
// top level touches, and instead of rendering the app it hands over its lazily loaded
// import module (the one behind the app's "load from file" and the CLI's base64 loader).
// The names are found by pattern in the pinned version (package-lock.json): if a new
// speedscope moves them, this script fails loudly rather than testing nothing.
'use strict';
const fs = require('fs');
const path = require('path');
const vm = require('vm');

const release = path.join(path.dirname(require.resolve('speedscope/package.json')), 'dist', 'release');

function fail(msg) {
  process.stderr.write('speedscope_import: ' + msg + '\n');
  process.exit(2);
}

function validate(file) {
  const Ajv = require('ajv');
  const schema = JSON.parse(fs.readFileSync(path.join(release, 'file-format-schema.json'), 'utf8'));
  const ajv = new Ajv({allErrors: false, strict: false});
  const check = ajv.compile(schema);
  const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
  const ok = check(doc);
  process.stdout.write(JSON.stringify({valid: ok, errors: ok ? [] : check.errors.slice(0, 10)}) + '\n');
}

async function load() {
  const bundle = fs.readdirSync(release).find(f => /^speedscope-[\w-]+\.js$/.test(f));
  if (!bundle) fail('no speedscope bundle in ' + release);
  let src = fs.readFileSync(path.join(release, bundle), 'utf8');
  const imp = /async function [\w$]+\([\w$]+,[\w$]+\)\{return\(await ([\w$]+)\)\.importProfileGroupFromBase64/.exec(src);
  if (!imp) fail('cannot find the import module in ' + bundle);
  const render = /;[\w$]+\([\w$]+\([\w$]+,null,[\w$]+\([\w$]+,null\)\),document\.body,document\.body\.lastElementChild\|\|void 0\);\}\)\(\);/;
  if (!render.test(src)) fail('cannot find the render call in ' + bundle);
  src = src.replace(render, ';globalThis.__fennecImport=' + imp[1] + ';})();');
  const noop = () => {};
  const element = () => ({style: {}, appendChild: noop, addEventListener: noop, setAttribute: noop, getContext: () => null});
  const messages = [];
  const quiet = {log: m => messages.push(String(m)), warn: m => messages.push(String(m)), error: m => messages.push(String(m)),
    info: noop, debug: noop, time: noop, timeEnd: noop};
  const ctx = {
    window: {devicePixelRatio: 1, addEventListener: noop, removeEventListener: noop,
      location: {href: 'file:///fennec', hash: '', search: '', protocol: 'file:'},
      localStorage: {getItem: () => null, setItem: noop}, matchMedia: () => ({matches: false, addEventListener: noop, addListener: noop})},
    document: {createElement: element, head: element(), body: element(), addEventListener: noop, documentElement: element(),
      querySelector: () => null},
    navigator: {userAgent: 'node', platform: 'linux'}, console: quiet, setTimeout, clearTimeout, requestAnimationFrame: noop,
    TextDecoder, TextEncoder, URL, atob, btoa, performance, WebAssembly, queueMicrotask,
  };
  ctx.globalThis = ctx;
  ctx.self = ctx;
  vm.createContext(ctx);
  vm.runInContext(src, ctx, {filename: bundle});
  return {module: await ctx.__fennecImport, messages};
}

async function main() {
  const args = process.argv.slice(2);
  if (args[0] === '--schema') return validate(args[1]);
  if (args.length !== 1) fail('usage: speedscope_import.js [--schema] FILE');
  const file = args[0];
  const {module: mod, messages} = await load();
  const data = fs.readFileSync(file);
  const buf = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength);
  const group = await mod.importProfilesFromArrayBuffer(path.basename(file), buf);
  if (!group) {
    process.stdout.write(JSON.stringify({imported: false, messages}) + '\n');
    return;
  }
  const profiles = group.profiles.map(p => {
    const frames = [];
    p.forEachFrame(f => frames.push({name: f.name, file: f.file || null, line: f.line || null,
      self: f.getSelfWeight(), total: f.getTotalWeight()}));
    let samples = 0;
    if (typeof p.getSamples === 'function') samples = p.getSamples().length;
    return {name: p.getName(), unit: p.getWeightUnit(), total_weight: p.getTotalWeight(), samples, frames};
  });
  process.stdout.write(JSON.stringify({imported: true, importer: messages.filter(m => /^Importing as/.test(m)),
    name: group.name, profiles}) + '\n');
}

main().catch(e => fail(e && e.stack || String(e)));
