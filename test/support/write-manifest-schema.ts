/** Writes docs/evidence-manifest.schema.json from the schema the code validates with. */
import { writeFileSync } from "node:fs";
import { evidenceManifestSchema } from "@farm/shared/evidence-manifest";
import { manifestSchemaDoc } from "./manifest-schema-doc.js";

writeFileSync(manifestSchemaDoc, JSON.stringify(evidenceManifestSchema, null, 2) + "\n");
console.log(`wrote ${manifestSchemaDoc}`);
