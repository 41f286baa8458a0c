// Two projects: `unit` (pure logic, beside the code) and `integration` (against the real
// control plane that test/harness starts once per run in its global setup).
const transform = {
  "^.+\\.ts$": ["ts-jest", { useESM: true, tsconfig: "tsconfig.json" }],
};
const common = {
  extensionsToTreatAsEsm: [".ts"],
  transform,
  // Sources import siblings as `./x.ts` (runnable by Node directly); ts-jest may rewrite
  // them to `.js`, so map either back to the TypeScript file.
  moduleNameMapper: { "^(\\.{1,2}/.*)\\.js$": "$1" },
  testEnvironment: "node",
};

export default {
  projects: [
    {
      ...common,
      displayName: "unit",
      testMatch: ["<rootDir>/src/**/*.test.ts", "<rootDir>/test/unit/**/*.test.ts"],
    },
    {
      ...common,
      displayName: "integration",
      testMatch: ["<rootDir>/test/integration/**/*.test.ts", "<rootDir>/examples/**/*.test.ts"],
      globalSetup: "<rootDir>/test/harness/global-setup.js",
      globalTeardown: "<rootDir>/test/harness/global-teardown.js",
      slowTestThreshold: 30,
    },
  ],
};
