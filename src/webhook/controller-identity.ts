/**
 * Who the controller is to the API server: the username in the `userInfo` of every request it
 * makes, which is what an AdmissionReview carries. The webhook runs in the controller's process,
 * so it asks with the controller's own credentials (a SelfSubjectReview, authentication.k8s.io/v1,
 * which every authenticated user may create) rather than trusting a flag that could disagree.
 */
import type { KubeClient } from "../kube/client.ts";

const SELF_SUBJECT_REVIEW_PATH = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

/**
 * The username the API server sees for `client`'s credentials (`system:serviceaccount:NS:NAME`
 * in a pod). Throws when the review cannot be made or names no user.
 */
export async function selfUsername(
  client: Pick<KubeClient, "request">,
  signal?: AbortSignal,
): Promise<string> {
  const review = await client.request<{ status?: { userInfo?: { username?: unknown } } }>(
    "POST",
    SELF_SUBJECT_REVIEW_PATH,
    {
      body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
      signal,
    },
  );
  const username = review?.status?.userInfo?.username;
  if (typeof username !== "string" || username === "")
    throw new Error("the API server's SelfSubjectReview named no user for the controller's credentials");
  return username;
}

/**
 * {@link selfUsername} asked once and remembered; a failure is not remembered, so the next call
 * asks again.
 */
export function rememberedSelfUsername(
  client: Pick<KubeClient, "request">,
): (signal?: AbortSignal) => Promise<string> {
  let known: Promise<string> | undefined;
  return (signal) => {
    if (!known) {
      known = selfUsername(client, signal);
      known.catch(() => (known = undefined));
    }
    return known;
  };
}
