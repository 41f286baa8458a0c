/**
 * The resolver's gate on a ServiceAccount's access: a subscription that reads as an account
 * (spec.serviceAccountRef, or the resolver's `serviceAccount`) computes nothing, and pushes
 * nothing, for a source the account may not read. The answers come from the access reviews
 * (access-reviews.ts), made on first use; when they change, the subscriptions that held them
 * compute again, and so check again.
 */
import type { ServiceAccountRef } from "../api/referable.ts";
import { ResolutionError } from "../api/errors.ts";
import type { KubeClient } from "../kube/client.ts";
import type { ResourceInfo } from "../kube/discovery.ts";
import type { Logger } from "../api/log.ts";
import {
  AccessReviews,
  type AccessAttributes,
  type AccessEntry,
  type AccessHolder,
  type AccessVerdict,
} from "./access-reviews.ts";
import type { CompiledRequest } from "./request.ts";
import type { ResolutionResult } from "./types.ts";

/** Options for {@link AccessGate}. */
export interface AccessGateOptions {
  /** The reviews to share; made over `client` on first use when absent. */
  accessReviews?: AccessReviews | undefined;
  client: () => KubeClient;
  logger: Logger;
  /** Told which answers changed ("all": every one was dropped): their holders must check again. */
  onChange: (entries: ReadonlySet<AccessEntry> | "all") => void;
}

/** See the module comment. */
export class AccessGate {
  private readonly options: AccessGateOptions;
  private access: AccessReviews | undefined;

  constructor(options: AccessGateOptions) {
    this.options = options;
  }

  /**
   * Whether `identity` may read `request`'s source(s) of `resource`, for `holder`: undefined
   * while the answer is not known (`retry` runs when it is), a Forbidden result when refused,
   * `true` when allowed.
   */
  check(
    identity: ServiceAccountRef,
    request: CompiledRequest,
    resource: ResourceInfo,
    holder: AccessHolder,
    retry: () => void,
  ): ResolutionResult | true | undefined {
    const verdict = this.reviews().check(identity, accessAttributes(request, resource), holder, retry);
    if (verdict === undefined) return undefined;
    return verdict.allowed ? true : forbidden(verdict.message);
  }

  /** For a one-off read: undefined when `identity` may read, else the Forbidden result. */
  async authorize(
    identity: ServiceAccountRef,
    request: CompiledRequest,
    resource: ResourceInfo,
  ): Promise<ResolutionResult | undefined> {
    const verdict = await this.decided(identity, accessAttributes(request, resource));
    return verdict.allowed ? undefined : forbidden(verdict.message);
  }

  /** Lets go of the answers `holder` holds. */
  release(holder: AccessHolder): void {
    this.access?.release(holder);
  }

  /** Stops the reviews' RBAC watch, if they were made. */
  async stop(): Promise<void> {
    await this.access?.stop();
  }

  /** The access reviews, made (and watched for changes) on first use. */
  private reviews(): AccessReviews {
    if (this.access) return this.access;
    const { logger } = this.options;
    const access =
      this.options.accessReviews ??
      new AccessReviews({
        client: this.options.client(),
        logger: logger.child?.({ part: "access" }) ?? logger,
      });
    this.access = access;
    access.onChange((entries) => this.options.onChange(entries));
    return access;
  }

  /** The verdict on `attributes` for `identity`, once known (for a one-off read). */
  private decided(
    identity: ServiceAccountRef,
    attributes: AccessAttributes,
  ): Promise<NonNullable<AccessVerdict>> {
    const access = this.reviews();
    const holder = { accessHeld: undefined };
    return new Promise((resolve) => {
      const attempt = (): void => {
        const verdict = access.check(identity, attributes, holder, attempt);
        if (verdict === undefined) return;
        access.release(holder);
        resolve(verdict);
      };
      attempt();
    });
  }
}

/** What a ServiceAccount must be allowed to read `request`'s source(s) of `resource`. */
function accessAttributes(request: CompiledRequest, resource: ResourceInfo): AccessAttributes {
  const attributes: AccessAttributes = {
    verb: request.target === "name" ? "get" : "list",
    group: resource.group,
    resource: resource.resource,
    namespace: resource.namespaced ? (request.namespace ?? "") : "",
  };
  if (request.target === "name" && request.name !== undefined) attributes.name = request.name;
  return attributes;
}

/** A refused read: no value, the refusal's message (the account, the verb, the resource). */
function forbidden(message: string): ResolutionResult {
  return {
    ok: false,
    error: new ResolutionError("Forbidden", message),
  };
}
