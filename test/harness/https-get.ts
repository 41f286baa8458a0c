/**
 * GET over HTTPS as a Prometheus scraper does: the controller's metrics certificate is
 * self-signed (no --metrics-cert-dir in deploy/), so it is not verified, as the ServiceMonitor's
 * insecureSkipVerify; `token` goes in the Authorization header. Shared by the deploy and image
 * tests, which scrape the controller the same way.
 */
import { request as httpsRequest } from "node:https";

export function httpsGet(url: string, token?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      url,
      {
        rejectUnauthorized: false,
        agent: false,
        timeout: 5000,
        headers: token ? { authorization: `Bearer ${token}` } : {},
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on("error", reject);
    req.end();
  });
}
