/**
 * One object's fields brought to what a Referable exports there (see output.ts): the object
 * read, the fields the Referable may own decided (ownership.ts), then applied (and filled) only
 * where they differ, and the records of what it holds returned.
 */
import type { ExportRecord } from "../../api/referable.ts";
import type { ResourceInfo } from "../../kube/discovery.ts";
import type { Logger } from "../../api/log.ts";
import type { TargetWriter } from "../export-output.ts";
import { fieldManagerFor } from "../keys/target.ts";
import { decide, type FieldClaims } from "./ownership.ts";
import { findRecord, pathOfRecord, recordOf, type ObjectPlan, type Problem } from "./plan.ts";
import { describeFieldObject } from "./target.ts";
import {
  applyFields,
  fillField,
  readFieldObject,
  type AskedField,
  type FieldWriteOptions,
} from "./writer.ts";

/** What a field sync works with: the controller's claims on fields, its logger and its metrics hook. */
export interface FieldSync {
  claims: FieldClaims;
  logger: Logger;
  /** Told of every write, for metrics. Must not throw. */
  onWrite?: ((result: "success" | "conflict" | "forbidden" | "error") => void) | undefined;
}

/** Reads the object, then applies (and fills) what differs. Throws what the status reports for the whole object. */
export async function syncFieldObject(
  ctx: FieldSync,
  name: string,
  resource: ResourceInfo,
  p: ObjectPlan,
  value: unknown,
  previous: ExportRecord[],
  problems: Problem[],
  writer: TargetWriter,
): Promise<ExportRecord[]> {
  const options = fieldWriteOptions(name, writer);
  const { client } = writer;
  const asked: AskedField[] = [
    ...p.targets.map((t) => ({ fieldPath: t.fieldPath, path: t.path, value })),
    ...p.dropped
      .map(pathOfRecord)
      .filter((a) => a.path !== undefined)
      .map((a) => ({ ...a, path: a.path!, value: undefined })),
  ];
  const state = await readFieldObject(client, resource, p.object, asked, options);
  const what = describeFieldObject(p.object);
  if (!state.exists || !state.uid) {
    if (p.targets.length > 0)
      problems.push({
        reason: "TargetNotFound",
        message: `${what} does not exist: objects are never created for a field; create it, or export to another object`,
        retry: false,
      });
    return p.targets.map((t) => recordOf(t, undefined));
  }
  const { body, included, fills, force } = decide(ctx.claims, name, what, p, state, value, problems);
  const stale = [...state.applied].some((fp) => !included.has(fp));
  const differs = [...included].some((fp) => {
    const f = state.fields.get(fp)!;
    return !(f.mine && f.equal);
  });
  let resourceVersion = state.resourceVersion;
  let written = false;
  if (differs || stale) {
    resourceVersion = await applyFields(client, resource, p.object, body, state.uid, { ...options, force }, [
      value,
    ]);
    written = true;
  }
  for (const t of fills) {
    resourceVersion = await fillField(client, resource, p.object, t.path, value, resourceVersion!, options);
    written = true;
  }
  if (written) {
    ctx.onWrite?.("success");
    ctx.logger.info(
      { referable: name, target: what, fields: included.size + fills.length },
      "exported the value into fields",
    );
  }
  return p.targets.map((t) => {
    const wroteIt = written && (included.has(t.fieldPath) || fills.includes(t));
    return recordOf(
      t,
      wroteIt ? resourceVersion : (findRecord(previous, t)?.resourceVersion ?? resourceVersion),
    );
  });
}

/** The options of a field write for the Referable `name`, made as `writer`. */
export function fieldWriteOptions(name: string, writer: TargetWriter): FieldWriteOptions {
  return {
    serviceAccount: writer.serviceAccount,
    fieldManager: fieldManagerFor(name),
    forbiddenHint:
      "opt the kind in: an administrator grants the controller get and patch on it (a ClusterRole labelled referable.dev/aggregate-to-export-fields, deploy/examples/export-fields)",
  };
}
