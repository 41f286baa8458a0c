import { parseBindAddress } from "./bind-address.ts";
import { parserCases } from "../../test/harness/parser-cases.ts";

describe("parseBindAddress", () => {
  parserCases(
    parseBindAddress,
    [
      { reason: "port only: every interface", text: ":8080", want: { host: undefined, port: 8080 } },
      { reason: "IPv4 host and port", text: "127.0.0.1:9090", want: { host: "127.0.0.1", port: 9090 } },
      { reason: "bracketed IPv6 host", text: "[::1]:8080", want: { host: "::1", port: 8080 } },
      { reason: "a host name", text: "localhost:8081", want: { host: "localhost", port: 8081 } },
      { reason: "0 turns the endpoint off", text: "0", want: undefined },
      { reason: "port 0: any free port", text: ":0", want: { host: undefined, port: 0 } },
      { reason: "the highest port", text: "0.0.0.0:65535", want: { host: "0.0.0.0", port: 65535 } },
    ],
    [
      { reason: "empty", text: "" },
      { reason: "a port without a colon", text: "8080" },
      { reason: "a colon without a port", text: ":" },
      { reason: "a host without a port", text: "127.0.0.1" },
      { reason: "unbracketed IPv6", text: "::1:8080" },
      { reason: "bracketed IPv6 without a port", text: "[::1]" },
      { reason: "bracketed IPv6 without the colon", text: "[::1]8080" },
      { reason: "empty brackets", text: "[]:80" },
      { reason: "a port out of range", text: ":65536" },
      { reason: "a port far out of range", text: ":999999" },
      { reason: "a named port", text: "localhost:http" },
      { reason: "a negative port", text: ":-1" },
      { reason: "a scheme", text: "http://127.0.0.1:8080" },
    ],
    (text) => `bind address ${JSON.stringify(text)} is not of the form [host]:port`,
  );
});
