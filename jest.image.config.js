// `npm run test:image`: builds the Dockerfile with podman and runs the image against a test
// control plane (test/image/). Not part of `npm test`, which needs no container engine: it needs
// podman, runc and debootstrap (README, "The container image"; .ci/run installs them).
import config from "./jest.config.js";

const integration = config.projects.find((p) => p.displayName === "integration");

export default {
  projects: [
    {
      ...integration,
      displayName: "image",
      testMatch: ["<rootDir>/test/image/**/*.test.ts"],
      slowTestThreshold: 600,
    },
  ],
};
