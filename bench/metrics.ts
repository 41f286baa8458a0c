/** A controller's /metrics, scraped into a map of series to values, and the sums and quantiles read from it. */

/** The series of the /metrics a controller serves on `metricsPort`, by name and labels. */
export async function scrape(c: { metricsPort: number }): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${c.metricsPort}/metrics`)).text();
  const values = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    values.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return values;
}

/** The sum of the series starting with `prefix` (and passing `filter`). */
export function sumOf(
  metrics: Map<string, number>,
  prefix: string,
  filter: (key: string) => boolean = () => true,
): number {
  let total = 0;
  for (const [key, value] of metrics) if (key.startsWith(prefix) && filter(key)) total += value;
  return total;
}

/** A counter summed over the replicas (series starting with `prefix`), per Referable of `n`. */
export function perReferable(metrics: Map<string, number>[], prefix: string, n: number): number {
  return Number((metrics.reduce((total, m) => total + sumOf(m, prefix), 0) / n).toFixed(2));
}

/** Requests by verb from rest_client_request_duration_seconds_count{verb}. */
export function requestsByVerb(metrics: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, value] of metrics) {
    const m = /^rest_client_request_duration_seconds_count\{verb="([a-z]+)"\}$/.exec(key);
    if (m) out[m[1]!] = value;
  }
  return out;
}

/** Quantile estimate from the delta of a Prometheus histogram's buckets (the bucket's upper bound, ms). */
export function histogramQuantile(
  before: Map<string, number>,
  after: Map<string, number>,
  name: string,
  q: number,
  labels = "",
): number {
  const buckets: Array<[number, number]> = [];
  for (const [key, value] of after) {
    // prom-client writes `le` first: name_bucket{le="0.1",verb="patch"}
    const m = new RegExp(`^${name}_bucket\\{le="([^"]+)"${labels ? `,${labels}` : ""}\\}$`).exec(key);
    if (m) buckets.push([m[1] === "+Inf" ? Infinity : Number(m[1]), value - (before.get(key) ?? 0)]);
  }
  buckets.sort((a, b) => a[0] - b[0]);
  const total = buckets[buckets.length - 1]?.[1] ?? 0;
  if (!total) return NaN;
  return (buckets.find(([, count]) => count >= q * total)?.[0] ?? Infinity) * 1000;
}
