import { defineConfig } from "vite";

// Served by the coordinator under /dashboard/; everything is bundled, nothing is fetched from elsewhere.
export default defineConfig({
  root: import.meta.dirname,
  base: "/dashboard/",
  build: { outDir: "dist", emptyOutDir: true, target: "es2022", sourcemap: false },
  logLevel: "warn",
});
