/**
 * The spec schema of a Task shaped like Crossplane's AWS DataSync managed resource: the target
 * kind of the field-export tests and of the bench's field exports.
 */
export const TASK_SPEC = {
  type: "object",
  properties: {
    forProvider: {
      type: "object",
      properties: {
        sourceLocationArn: { type: "string" },
        destinationLocationArn: { type: "string" },
        cloudWatchLogGroupArn: { type: "string" },
        name: { type: "string" },
        options: { type: "object", properties: { bytesPerSecond: { type: "integer" } } },
        tags: { type: "array", items: { type: "string" } },
      },
    },
    providerConfigRef: { type: "object", properties: { name: { type: "string" } } },
  },
};
