import { toApiError } from "./api-error.ts";

/** A Status body as the API server sends it. */
const status = (code: number, reason: string, message: string, causes?: unknown[]) =>
  JSON.stringify({
    kind: "Status",
    apiVersion: "v1",
    status: "Failure",
    code,
    reason,
    message,
    ...(causes && { details: { causes } }),
  });

/** A CRD rule's refusal whose messageExpression quotes another field of the object. */
const RULE_REFUSAL = status(
  422,
  "Invalid",
  'Vault.example.org "v" is invalid: spec: Invalid value: "object": web-1 is no host; the password is hunter2',
  [
    {
      reason: "FieldValueInvalid",
      message: 'Invalid value: "object": web-1 is no host; the password is hunter2',
      field: "spec",
    },
  ],
);

describe("toApiError", () => {
  const cases: Array<{ reason: string; code: number; body: string; want: string }> = [
    {
      reason: "a CRD rule's refusal: the status, the reason code and the field path, not the rule's message",
      code: 422,
      body: RULE_REFUSAL,
      want: "PATCH /x: 422 Invalid (FieldValueInvalid at spec)",
    },
    {
      reason: "an apply conflict: the other manager (from the cause's exact wording) and the field",
      code: 409,
      body: status(
        409,
        "Conflict",
        'Apply failed with 1 conflict: conflict with "kubectl-patch" using v1: .data.K',
        [
          {
            reason: "FieldManagerConflict",
            message: 'conflict with "kubectl-patch" using v1',
            field: ".data.K",
          },
        ],
      ),
      want: 'PATCH /x: 409 Conflict (conflict with "kubectl-patch" at .data.K)',
    },
    {
      reason: "a conflict cause worded otherwise: no manager is read out of it",
      code: 409,
      body: status(409, "Conflict", "x", [
        {
          reason: "FieldManagerConflict",
          message: 'conflict with "a" and the password is hunter2',
          field: ".data.K",
        },
      ]),
      want: "PATCH /x: 409 Conflict (FieldManagerConflict at .data.K)",
    },
    {
      reason: "a reason that is not a code (a webhook's free text) is left out, of the Status and of a cause",
      code: 403,
      body: status(403, "the password is hunter2", "denied", [{ reason: "no: hunter2", field: "spec.a" }]),
      want: "PATCH /x: 403 (at spec.a)",
    },
    {
      reason: "more causes than eight: the first eight, and how many more",
      code: 422,
      body: status(
        422,
        "Invalid",
        "many",
        Array.from({ length: 10 }, (_, i) => ({
          reason: "FieldValueRequired",
          message: "m",
          field: `spec.f${i}`,
        })),
      ),
      want: `PATCH /x: 422 Invalid (${Array.from({ length: 8 }, (_, i) => `FieldValueRequired at spec.f${i}`).join(", ")} and 2 more)`,
    },
    {
      reason: "a body that is not a Status (a proxy's page): the code only",
      code: 502,
      body: "<html>bad gateway: hunter2</html>",
      want: "PATCH /x: 502",
    },
  ];
  it.each(cases)("$reason", ({ code, body, want }) => {
    const err = toApiError("PATCH", "/x", code, body);
    expect(err.message).toBe(want);
    expect(JSON.stringify({ ...err, message: err.message })).not.toContain("hunter2");
  });

  it("keeps the server's text only to be tested", () => {
    const err = toApiError("PATCH", "/x", 422, RULE_REFUSAL);
    expect(err.serverSaid(/is no host/)).toBe(true);
    expect(err.serverSaid(/admission webhook/)).toBe(false);
    expect(err.summary).toBe("422 Invalid (FieldValueInvalid at spec)");
    expect(err.causes).toEqual([{ reason: "FieldValueInvalid", field: "spec" }]);
  });

  it("quotes the server's text for a client made to (a person at a terminal)", () => {
    expect(toApiError("PATCH", "/x", 422, RULE_REFUSAL, true).message).toBe(
      'PATCH /x: 422 Invalid (FieldValueInvalid at spec): Vault.example.org "v" is invalid: spec: Invalid value: "object": web-1 is no host; the password is hunter2',
    );
  });
});
