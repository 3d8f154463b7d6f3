// Lint for what the compiler does not catch: promises nobody awaits or
// handles. Type-aware, so it reads each package's tsconfig. Import cycles are
// checked by scripts/check-cycles.sh (dpdm), which is several times faster.
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["**/dist/**", "**/gen/**", "**/node_modules/**", "test-artifacts/**", "dashboard/vite.config.ts"] },
  {
    files: ["{agent,coordinator,cli,client,shared,dashboard}/src/**/*.ts", "test/**/*.ts"],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { "@typescript-eslint": tseslint.plugin },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
    },
  },
);
