// Lint for what the compiler does not catch: promises nobody awaits or
// handles, and import cycles. Type-aware, so it reads each package's tsconfig.
import { createTypeScriptImportResolver } from "eslint-import-resolver-typescript";
import importX from "eslint-plugin-import-x";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["**/dist/**", "**/gen/**", "**/node_modules/**", "dashboard/**", "test-artifacts/**"] },
  {
    files: ["{agent,coordinator,cli,shared}/src/**/*.ts", "test/**/*.ts"],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { "@typescript-eslint": tseslint.plugin, "import-x": importX },
    settings: {
      // no-cycle parses each imported file itself: it needs to know .ts and how to parse it.
      "import-x/extensions": [".ts", ".js"],
      "import-x/parsers": { "@typescript-eslint/parser": [".ts"] },
      "import-x/resolver-next": [createTypeScriptImportResolver({ project: ["{agent,coordinator,cli,shared,test}/tsconfig.json"], noWarnOnMultipleProjects: true })],
    },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "import-x/no-cycle": "error",
    },
  },
);
