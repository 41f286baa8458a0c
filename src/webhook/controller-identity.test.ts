import { rememberedSelfUsername, selfUsername } from "./controller-identity.ts";

/** A client whose SelfSubjectReview answers `answers` in turn (an Error is thrown). */
function fakeClient(answers: Array<unknown>) {
  const asked: string[] = [];
  return {
    asked,
    request: async <T>(method: string, path: string): Promise<T> => {
      asked.push(`${method} ${path}`);
      const next = answers.shift();
      if (next instanceof Error) throw next;
      return next as T;
    },
  };
}

const review = (username: unknown) => ({ status: { userInfo: { username } } });

describe("selfUsername", () => {
  it("asks the API server with a SelfSubjectReview and returns the username it saw", async () => {
    const client = fakeClient([review("system:serviceaccount:referable-system:referable-controller")]);
    expect(await selfUsername(client)).toBe("system:serviceaccount:referable-system:referable-controller");
    expect(client.asked).toEqual(["POST /apis/authentication.k8s.io/v1/selfsubjectreviews"]);
  });
  it("throws when the answer names no user, rather than compare against nothing", async () => {
    await expect(selfUsername(fakeClient([review("")]))).rejects.toThrow("named no user");
    await expect(selfUsername(fakeClient([{}]))).rejects.toThrow("named no user");
  });
});

describe("rememberedSelfUsername", () => {
  it("asks once and remembers the answer", async () => {
    const client = fakeClient([review("me")]);
    const username = rememberedSelfUsername(client);
    expect(await username()).toBe("me");
    expect(await username()).toBe("me");
    expect(client.asked).toHaveLength(1);
  });
  it("does not remember a failure: the next call asks again", async () => {
    const client = fakeClient([new Error("connection refused"), review("me")]);
    const username = rememberedSelfUsername(client);
    await expect(username()).rejects.toThrow("connection refused");
    expect(await username()).toBe("me");
    expect(client.asked).toHaveLength(2);
  });
});
