import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", "coverage/", "bench/.dist/", "bench/profiles/", "bench/logs/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: "readonly",
        console: "readonly",
        setTimeout: "readonly",
        clearTimeout: "readonly",
        setInterval: "readonly",
        clearInterval: "readonly",
        URL: "readonly",
        Buffer: "readonly",
        AbortController: "readonly",
        fetch: "readonly",
      },
    },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
      "no-throw-literal": "error",
    },
  },
  {
    // Functions of one job: a longer one is split (house style), and this keeps it so.
    files: ["src/**/*.ts"],
    ignores: ["src/**/*.test.ts"],
    rules: { "max-lines-per-function": ["error", { max: 80 }] },
  },
);
