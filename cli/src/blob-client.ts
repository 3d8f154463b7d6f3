/** The CLI's blob transfers are the client library's (one copy): a TransferMeter is its progress. */
export { downloadFile, uploadFile } from "@farm/client/blob-files";
