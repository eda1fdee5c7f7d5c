// Reads BLIS tables with readers we did not write: DuckDB (Parquet) and
// Arrow JS (Arrow IPC file and stream). Arguments: pairs of PATH COLUMN.
// Prints one JSON object per table: rows, column names, the schema
// metadata, the first value of the first column and the sum of COLUMN.
const { DuckDBInstance } = require('@duckdb/node-api');
const arrow = require('apache-arrow');
const fs = require('fs');

async function duck(con, path, col) {
  const q = (sql) => con.runAndReadAll(sql).then((r) => r.getRowObjectsJson());
  const src = `read_parquet('${path.replace(/'/g, "''")}')`;
  const rows = await q(`SELECT count(*)::BIGINT AS n, sum("${col}")::BIGINT AS s FROM ${src}`);
  const cols = await q(`DESCRIBE SELECT * FROM ${src}`);
  const first = await q(`SELECT * FROM ${src} LIMIT 1`);
  const kv = await q(`SELECT decode(key) AS k, decode(value) AS v FROM parquet_kv_metadata('${path.replace(/'/g, "''")}')`);
  const meta = {};
  for (const { k, v } of kv) if (k !== 'ARROW:schema') meta[k] = v;
  const names = cols.map((c) => c.column_name);
  return { reader: 'duckdb', rows: Number(rows[0].n), columns: names, meta,
    first: first.length ? String(first[0][names[0]]) : null, sum: String(rows[0].s ?? 0) };
}

function arrowJS(path, col) {
  const t = arrow.tableFromIPC(fs.readFileSync(path));
  const names = t.schema.fields.map((f) => f.name);
  let sum = 0n;
  const c = t.getChild(col);
  for (let i = 0; i < t.numRows; i++) {
    const v = c.get(i);
    if (v !== null) sum += BigInt(v);
  }
  return { reader: 'arrow-js', rows: t.numRows, columns: names, meta: Object.fromEntries(t.schema.metadata),
    first: t.numRows ? String(t.getChildAt(0).get(0)) : null, sum: String(sum) };
}

(async () => {
  const inst = await DuckDBInstance.create(':memory:', { threads: '1' });
  const con = await inst.connect();
  const out = {};
  const args = process.argv.slice(2);
  for (let i = 0; i < args.length; i += 2) {
    const [path, col] = [args[i], args[i + 1]];
    out[path] = path.endsWith('.parquet') ? await duck(con, path, col) : arrowJS(path, col);
  }
  process.stdout.write(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
